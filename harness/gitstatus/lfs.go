package gitstatus

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"regexp"
	"strconv"
)

// Git LFS, natively: a path whose filter attribute is "lfs" holds a small
// pointer blob in the tree ("version ...\noid sha256:<hex>\nsize <n>\n")
// and its content in .git/lfs/objects. The harness never runs git-lfs; it
// recognises the configuration `git lfs install` writes and does the
// filter's two jobs itself: clean (content -> pointer) for statuses and
// hashes, smudge (pointer -> content, from the local object store, checked
// against the oid) for copies.

// lfsCommands are the filter.lfs.* values `git lfs install` writes (with
// and without --skip-smudge). Any other value is a driver the harness
// would have to run, and stays refused.
var lfsCommands = map[string]map[string]bool{
	"clean":   {"git-lfs clean -- %f": true},
	"smudge":  {"git-lfs smudge -- %f": true, "git-lfs smudge --skip -- %f": true},
	"process": {"git-lfs filter-process": true, "git-lfs filter-process --skip": true},
}

// standardLFS reports whether the configured filter.lfs driver is git-lfs
// as its installer writes it: every clean, smudge and process value one of
// lfsCommands, and at least one of them set.
func standardLFS(cfg *Config) bool {
	set := false
	for k, ok := range lfsCommands {
		v, present := cfg.Get("filter.lfs." + k)
		if !present || v == "" {
			continue
		}
		if !ok[v] {
			return false
		}
		set = true
	}
	return set
}

// LFSEnabled reports whether git would run git-lfs for paths with
// filter=lfs in this configuration (the standard driver is configured).
func LFSEnabled(cfg *Config) bool { return cfg != nil && standardLFS(cfg) }

const lfsVersion = "version https://git-lfs.github.com/spec/v1\n"

var lfsPointerRE = regexp.MustCompile(`\Aversion https://git-lfs\.github\.com/spec/v1\noid sha256:([0-9a-f]{64})\nsize (0|[1-9][0-9]{0,18})\n\z`)

// ParseLFSPointer reads a canonical LFS pointer: the oid (hex SHA-256 of
// the content) and the content's size. ok is false for anything else,
// which git-lfs's smudge passes through as it is.
func ParseLFSPointer(b []byte) (oid string, size int64, ok bool) {
	if len(b) > 200 || !bytes.HasPrefix(b, []byte(lfsVersion)) {
		return "", 0, false
	}
	m := lfsPointerRE.FindSubmatch(b)
	if m == nil {
		return "", 0, false
	}
	size, err := strconv.ParseInt(string(m[2]), 10, 64)
	if err != nil {
		return "", 0, false
	}
	return string(m[1]), size, true
}

// LFSPointer is the canonical pointer for content of the given oid and size.
func LFSPointer(oid string, size int64) []byte {
	return []byte(lfsVersion + "oid sha256:" + oid + "\nsize " + strconv.FormatInt(size, 10) + "\n")
}

// lfsClean is git-lfs's clean: a pointer stays as it is, other content
// becomes its pointer.
func lfsClean(b []byte) []byte {
	if _, _, ok := ParseLFSPointer(b); ok {
		return b
	}
	sum := sha256.Sum256(b)
	return LFSPointer(hex.EncodeToString(sum[:]), int64(len(b)))
}
