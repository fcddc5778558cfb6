package fakecase

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
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

// writeFile writes "exit 0" at rel in the fixture, and nothing else: a
// Case that replaces the check it is judged by instead of doing the task.
func writeFile(rel string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(c.root, filepath.FromSlash(rel))), 0o755); err != nil {
			return err
		}
		return c.write(rel, "exit 0\n")
	}
}

// plantTAP makes the canned change and leaves a passing TAP report at rel,
// for a verification that would read it instead of writing its own.
func plantTAP(rel string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		return c.write(rel, "TAP version 13\n1..1\nok 1 - planted by Case\n")
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

// procArgs looks for each of the ;-separated NEEDLES (paths the view hides)
// in the argv, environment and mount table of every process /proc shows, the
// launcher's (/proc/1) first: as plain text and base64-decoded, as a policy
// passed on the command line would be. The attempt is denied when no needle is found;
// where one was found is recorded, and the text it was in goes to the note.
// The scenario's own argument (which holds the needles) is skipped.
func procArgs(spec string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		needles := strings.Split(spec, ";")
		var found []string
		var leaked []string
		readable := 0
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if e.Name()[0] < '0' || e.Name()[0] > '9' {
				continue
			}
			// mountinfo names what each mount shows: an overlay's layers
			// among its options.
			for _, f := range []string{"cmdline", "environ", "mountinfo"} {
				p := filepath.Join("/proc", e.Name(), f)
				data, err := os.ReadFile(p)
				if err != nil {
					continue
				}
				readable++
				for _, arg := range strings.Split(string(data), "\x00") {
					if strings.Contains(arg, spec) {
						continue // this scenario's own argument, in its argv and the launcher's
					}
					for _, text := range decodings(arg) {
						for _, n := range needles {
							if n != "" && strings.Contains(text, n) {
								found = append(found, p)
								leaked = append(leaked, text)
							}
						}
					}
				}
			}
		}
		var err error
		switch {
		case readable == 0:
			return fmt.Errorf("proc-args: no /proc/*/cmdline, environ or mountinfo was readable; the attempt proves nothing")
		case len(found) == 0:
			err = fmt.Errorf("no hidden path in the %d readable /proc/*/cmdline, environ and mountinfo files", readable)
		default:
			if werr := c.writeNote(fmt.Sprintf("read from /proc:\n%s\n", strings.Join(leaked, "\n"))); werr != nil {
				return werr
			}
		}
		target := "/proc/*/cmdline,environ,mountinfo"
		if len(found) > 0 {
			target = strings.Join(found, ",")
		}
		c.attempt("proc-args", target, err, map[string]any{"found_in": found, "readable": readable})
		return nil
	}
}

// decodings is s and whatever base64 variant decodes it.
func decodings(s string) []string {
	out := []string{s}
	for _, enc := range []*base64.Encoding{base64.RawURLEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.StdEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			out = append(out, string(b))
		}
	}
	return out
}
