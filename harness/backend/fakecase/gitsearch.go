package fakecase

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// searchGit looks for NEEDLE everywhere the fixture's .git could hold
// it, as a Case looking for the answer in history would: git log --all -p
// and git cat-file --batch-all-objects where git is on PATH, every object
// go-git can iterate (loose and packed), and the raw and inflated bytes of
// every file under .git. A find is written to the note with where it was;
// the attempt is denied when nothing holds the needle.
func searchGit(needle string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		gitDir := filepath.Join(c.root, ".git")
		var found []string
		if bin, err := exec.LookPath("git"); err == nil {
			for _, args := range [][]string{{"log", "--all", "--reflog", "-p"}, {"cat-file", "--batch-all-objects", "--batch"}, {"stash", "list", "-p"}, {"tag", "-n"}} {
				cmd := exec.Command(bin, args...)
				cmd.Dir = c.root
				out, _ := cmd.Output()
				if bytes.Contains(out, []byte(needle)) {
					found = append(found, "git "+strings.Join(args, " "))
				}
			}
		}
		if r, err := git.PlainOpen(c.root); err == nil {
			if it, err := r.Storer.IterEncodedObjects(plumbing.AnyObject); err == nil {
				_ = it.ForEach(func(o plumbing.EncodedObject) error {
					rd, err := o.Reader()
					if err != nil {
						return nil
					}
					defer rd.Close()
					data, _ := io.ReadAll(io.LimitReader(rd, 16<<20))
					if bytes.Contains(data, []byte(needle)) {
						found = append(found, "object "+o.Hash().String())
					}
					return nil
				})
			}
		}
		_ = filepath.WalkDir(gitDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			if bytes.Contains(data, []byte(needle)) || (len(data) < 8<<20 && inflatedContains(data, needle)) {
				found = append(found, "file "+p)
			}
			return nil
		})
		var err error
		if len(found) == 0 {
			err = fmt.Errorf("%s is nowhere in %s", needle, gitDir)
		} else if werr := c.writeNote(fmt.Sprintf("found %s in %s\n", needle, strings.Join(found, ", "))); werr != nil {
			return werr
		}
		c.attempt("search-git", gitDir, err, map[string]any{"finds": len(found)})
		return nil
	}
}

// inflatedContains inflates every zlib stream that starts in data (a
// loose object, or an entry of a pack) and looks for needle in it.
func inflatedContains(data []byte, needle string) bool {
	for i := 0; i+2 <= len(data); i++ {
		if data[i] != 0x78 || (uint16(data[i])<<8|uint16(data[i+1]))%31 != 0 {
			continue
		}
		zr, err := zlib.NewReader(bytes.NewReader(data[i:]))
		if err != nil {
			continue
		}
		out, _ := io.ReadAll(io.LimitReader(zr, 16<<20))
		zr.Close()
		if bytes.Contains(out, []byte(needle)) {
			return true
		}
	}
	return false
}
