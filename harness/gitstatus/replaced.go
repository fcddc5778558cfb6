package gitstatus

import (
	"errors"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
)

// replacedByDir is git's check_removed for an entry that is not a gitlink
// but whose path is now a directory: the entry was removed ('D') unless the
// directory is a repository whose HEAD resolves to a commit
// (resolve_gitlink_ref), which git then reads as a gitlink, so a type
// change ('T'), or an addition ('A') for an intent-to-add entry, since a
// status does not show those as being in the index. A HEAD git could not
// resolve either (unborn, or a ref it cannot read) leaves it removed.
func (c *computer) replacedByDir(e *Entry) (byte, error) {
	gd, err := c.subGitDir(e.Name)
	if err != nil {
		return 0, err
	}
	if gd == "" {
		return 'D', nil
	}
	_, head, err := ResolveHead(gd)
	if errors.Is(err, syscall.ENAMETOOLONG) {
		return 0, nestedTooLong(e.Name, gd, err)
	}
	if err != nil || head == plumbing.ZeroHash {
		return 'D', nil
	}
	if e.IntentToAdd {
		return 'A', nil
	}
	return 'T', nil
}
