package fakecase

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// poisonGoCache is Case trying to reach a later run's verification through
// Go's build cache: it overwrites every entry of the $GOCACHE it is shown,
// and writes FILE (an allowed _test.go path) whose test does the same to
// the verification's $GOCACHE while the verification runs it. Were either
// kept, a later verification would link garbage and fail.
func poisonGoCache(file string) func(*caseRun) error {
	return func(c *caseRun) error {
		n, err := poisonCache(os.Getenv("GOCACHE"))
		c.attempt("poison-go-cache", os.Getenv("GOCACHE"), err, map[string]any{"entries": n})
		if !strings.HasSuffix(file, "_test.go") {
			return errors.New("poison-go-cache: FILE must be a _test.go file")
		}
		if err := os.MkdirAll(filepath.Join(c.root, filepath.Dir(filepath.FromSlash(file))), 0o755); err != nil {
			return err
		}
		return c.write(file, poisonTest)
	}
}

// poisonCache overwrites each entry under dir (a Go build cache) and plants
// one more; it returns how many it wrote.
func poisonCache(dir string) (int, error) {
	if dir == "" {
		return 0, errors.New("GOCACHE is not set")
	}
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if strings.HasSuffix(p, "-a") || strings.HasSuffix(p, "-d") {
			if werr := os.WriteFile(p, []byte("poisoned by Case\n"), 0o644); werr == nil {
				n++
			}
		}
		return nil
	})
	if werr := os.WriteFile(filepath.Join(dir, "00", "planted-d"), []byte("poisoned by Case\n"), 0o644); werr == nil {
		n++
	}
	return n, err
}

// poisonTest is the test Case adds: run by the verification, it overwrites
// every entry of the verification's build cache.
const poisonTest = `package app

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPoisonCache(t *testing.T) {
	n := 0
	filepath.WalkDir(os.Getenv("GOCACHE"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, "-a") || strings.HasSuffix(p, "-d")) {
			if os.WriteFile(p, []byte("poisoned by a test\n"), 0o644) == nil {
				n++
			}
		}
		return nil
	})
	t.Logf("poisoned %d build cache entries", n)
}
`
