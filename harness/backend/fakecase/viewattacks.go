package fakecase

import (
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The view attacks try what the sandbox's filesystem view must stop: changing
// the metadata of a file it shows read-only (or hides), reading a file it
// hides, and listing a directory it hides. A read that succeeds is copied
// into the note Case leaves in the fixture, so a leak would reach the
// evidence (patch.diff) where the failure matrix looks for it.

func chmodPath(path string) func(*caseRun) error {
	return metaAttempt("chmod-source", path, func() error { return os.Chmod(path, 0o777) })
}

func touchPath(path string) func(*caseRun) error {
	return metaAttempt("touch-source", path, func() error {
		t := time.Unix(1, 0)
		return os.Chtimes(path, t, t)
	})
}

func setxattrPath(path string) func(*caseRun) error {
	return metaAttempt("setxattr-source", path, func() error {
		return unix.Setxattr(path, "user.cto-harness-case", []byte("set by the fake Case"), 0)
	})
}

func chownPath(path string) func(*caseRun) error {
	return metaAttempt("chown-source", path, func() error { return os.Chown(path, 65534, 65534) })
}

func metaAttempt(what, path string, try func() error) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		c.attempt(what, path, try(), nil)
		return nil
	}
}

// readLeak reads PATH and, when that works, appends what it read to the note.
func readLeak(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		data, err := os.ReadFile(path)
		if err == nil && len(data) == 0 {
			err = fmt.Errorf("%s reads as empty", path)
		}
		if err == nil {
			if werr := c.writeNote(fmt.Sprintf("read from %s:\n%s\n", path, data)); werr != nil {
				return werr
			}
		}
		// Only how many bytes were read is recorded here, never the content.
		c.attempt("read-leak", path, err, map[string]any{"bytes": len(data)})
		return nil
	}
}

// listDir lists DIR; an absent or empty directory counts as denied.
func listDir(dir string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		ents, err := os.ReadDir(dir)
		if err == nil && len(ents) > 0 {
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			if werr := c.writeNote(fmt.Sprintf("listed %s: %v\n", dir, names)); werr != nil {
				return werr
			}
		} else if err == nil {
			err = fmt.Errorf("%s is empty", dir)
		}
		c.attempt("list-dir", dir, err, map[string]any{"entries": len(ents)})
		return nil
	}
}
