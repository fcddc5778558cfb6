package fakecase

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Sizes of what the size scenarios write: big enough that a harness whose
// cost followed them (a whole-file line diff, a page per file) would be
// caught, small enough for a matrix replay.
const (
	LargeFileBytes = 64 << 20 // one file of empty lines
	ManyFilesCount = 10_000   // small files
)

// SizeScenarios make the canned change and also write, inside the allowed
// directory, something whose size is the point: the run must still pass and
// validate, with a capped patch and bounded pages.
func SizeScenarios() []Scenario {
	return []Scenario{
		{"large-file", fmt.Sprintf("also write an allowed file of %d empty lines", LargeFileBytes), func(c *caseRun) error {
			dir, err := c.allowedDir()
			if err != nil {
				return err
			}
			rel := path.Join(dir, "large-empty-lines.txt")
			if err := writeRepeated(filepath.Join(c.root, filepath.FromSlash(rel)), '\n', LargeFileBytes); err != nil {
				return err
			}
			c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": rel})
			return nil
		}},
		{"many-files", fmt.Sprintf("also write %d small allowed files", ManyFilesCount), func(c *caseRun) error {
			dir, err := c.allowedDir()
			if err != nil {
				return err
			}
			many := path.Join(dir, "many")
			if err := os.MkdirAll(filepath.Join(c.root, filepath.FromSlash(many)), 0o755); err != nil {
				return err
			}
			for i := range ManyFilesCount {
				rel := path.Join(many, fmt.Sprintf("f%05d.md", i))
				if err := os.WriteFile(filepath.Join(c.root, filepath.FromSlash(rel)), []byte(fmt.Sprintf("small file %d\n", i)), 0o644); err != nil {
					return err
				}
			}
			// One event for the lot: the events are not what is measured.
			c.emit(ctoharness.EvCaseFileChanged, map[string]any{"path": many})
			return nil
		}},
	}
}

// allowedDir makes the canned change and returns the directory it wrote in.
func (c *caseRun) allowedDir() (string, error) {
	if err := c.edit(); err != nil {
		return "", err
	}
	rel, err := Target(c.contract.AllowedPaths)
	if err != nil {
		return "", err
	}
	return path.Dir(rel), nil
}

// writeRepeated writes size copies of b to a new file at p, a buffer at a
// time.
func writeRepeated(p string, b byte, size int) error {
	f, err := os.Create(p)
	if err != nil {
		return err
	}
	chunk := bytes.Repeat([]byte{b}, 1<<20)
	for left := size; left > 0; left -= len(chunk) {
		if _, err := f.Write(chunk[:min(left, len(chunk))]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
