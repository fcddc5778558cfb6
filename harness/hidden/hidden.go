// Package hidden is a task's set of hidden tests, which the verification
// lays over its checkout: files Case never saw, read from a directory
// of the task's own, checked against the digest recorded before Case
// started, written over Case's result right before setup and
// verification, and kept in the evidence as an archive.
package hidden

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseworld"
)

// Caps on a hidden test directory: it is read whole into memory, so that
// what is laid and archived is exactly what was digested.
const (
	MaxFiles = 10000
	MaxBytes = 32 << 20
)

// ErrHidden marks a hidden test directory that cannot be used.
var ErrHidden = errors.New("hidden tests")

// File is one hidden file.
type File struct {
	Path string // slash-separated, relative to the directory
	Exec bool
	data []byte
}

// Set is a hidden test directory as read, with its digest.
type Set struct {
	Dir    string
	Digest string // sha256 over each file's path, mode and content digest, in path order
	Files  []File
	Bytes  int64
}

// Read reads dir whole: directories and regular files only (a link, device
// or FIFO refuses it), no name with a .git component, within the caps.
func Read(ctx context.Context, dir string) (Set, error) {
	if !filepath.IsAbs(dir) {
		return Set{}, fmt.Errorf("%w: %s is not an absolute path", ErrHidden, dir)
	}
	st, err := os.Lstat(dir)
	if err != nil {
		return Set{}, fmt.Errorf("%w: %v", ErrHidden, err)
	}
	if !st.IsDir() {
		return Set{}, fmt.Errorf("%w: %s is not a directory (a link to one is not followed)", ErrHidden, dir)
	}
	s := Set{Dir: filepath.Clean(dir)}
	// Files are opened beneath the directory with no link followed in any
	// component: a directory another process writes (an adversary's) may
	// swap one for a link between the walk and the open.
	root, err := unix.Open(s.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return Set{}, fmt.Errorf("%w: open %s: %v", ErrHidden, s.Dir, err)
	}
	defer unix.Close(root)
	err = filepath.WalkDir(s.Dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.Dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if hasGitComponent(rel) {
			return fmt.Errorf("%s: a hidden test may not write into a .git directory", rel)
		}
		switch {
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return fmt.Errorf("%s is not a regular file or directory (%s)", rel, d.Type())
		}
		return s.add(root, rel)
	})
	if err != nil {
		return Set{}, fmt.Errorf("%w in %s: %v", ErrHidden, dir, err)
	}
	if len(s.Files) == 0 {
		return Set{}, fmt.Errorf("%w: %s holds no file", ErrHidden, dir)
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	s.Digest = digest(s.Files)
	return s, nil
}

func (s *Set) add(root int, rel string) error {
	if len(s.Files) >= MaxFiles {
		return fmt.Errorf("more than %d files", MaxFiles)
	}
	f, err := caseworld.OpenAt(root, s.Dir, rel)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", rel)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes-s.Bytes+1))
	if err != nil {
		return err
	}
	if s.Bytes += int64(len(data)); s.Bytes > MaxBytes {
		return fmt.Errorf("more than %d bytes in all", MaxBytes)
	}
	s.Files = append(s.Files, File{Path: rel, Exec: st.Mode()&0o111 != 0, data: data})
	return nil
}

func hasGitComponent(rel string) bool {
	for _, c := range strings.Split(rel, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}

// Record is what the report says of the set before it is laid.
func (s Set) Record() *ctoharness.HiddenTests {
	return &ctoharness.HiddenTests{Dir: s.Dir, Digest: s.Digest, Files: len(s.Files), Bytes: s.Bytes, Overridden: []string{}}
}

// Lay writes every file of s into checkout, replacing what the result has
// at its path, and returns the paths that existed there (Case's result
// had them). Nothing of the checkout is followed: a component that is a
// link, or a file where a directory is needed, is removed first, so a
// link Case committed cannot send a hidden file outside the checkout.
// Nothing runs in the checkout while it is laid.
func Lay(ctx context.Context, s Set, checkout string) ([]string, error) {
	overridden := []string{}
	for _, f := range s.Files {
		if err := ctx.Err(); err != nil {
			return overridden, err
		}
		existed, err := layOne(checkout, f)
		if err != nil {
			return overridden, fmt.Errorf("%w: lay %s over the checkout: %v", ErrHidden, f.Path, err)
		}
		if existed {
			overridden = append(overridden, f.Path)
		}
	}
	return overridden, nil
}

func layOne(checkout string, f File) (bool, error) {
	parts := strings.Split(f.Path, "/")
	dir, err := makeDirs(checkout, parts[:len(parts)-1])
	if err != nil {
		return false, err
	}
	target := filepath.Join(dir, parts[len(parts)-1])
	existed := false
	if st, err := os.Lstat(target); err == nil {
		existed = true
		if st.IsDir() {
			err = os.RemoveAll(target)
		} else {
			err = os.Remove(target)
		}
		if err != nil {
			return true, err
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	mode := os.FileMode(0o644)
	if f.Exec {
		mode = 0o755
	}
	out, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, mode)
	if err != nil {
		return existed, err
	}
	if _, err := out.Write(f.data); err != nil {
		out.Close()
		return existed, err
	}
	return existed, out.Close()
}

// makeDirs makes the directories parts name below checkout, one by one,
// replacing a link or a file on the way (the harness's tree wins), and
// returns the last.
func makeDirs(checkout string, parts []string) (string, error) {
	dir := checkout
	for _, c := range parts {
		dir = filepath.Join(dir, c)
		st, err := os.Lstat(dir)
		switch {
		case err == nil && st.IsDir():
			continue
		case err == nil:
			if err := os.Remove(dir); err != nil { // a link or a file: the hidden tree wins
				return dir, err
			}
		case !errors.Is(err, fs.ErrNotExist):
			return dir, err
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

// MakeDirs makes each directory of rels (relative, clean, no .. and no
// .git) in the checkout, empty: a task's layout links point there (its
// tests at /tests, its verifier's logs), and what Case's result holds
// there is removed unread, so no file of Case's (a conftest.py beside the
// tests) runs as the harness's own. keep are regular files left where
// they are (the test report's path, which the results step clears itself
// and records as planted). Each directory on the way is made as Lay makes
// a hidden file's: a link Case committed is replaced, never followed.
// Call it before Lay, which may lay files inside them; nothing runs in the
// checkout meanwhile. It returns the paths removed.
func MakeDirs(ctx context.Context, checkout string, rels, keep []string) ([]string, error) {
	var removed []string
	for _, rel := range rels {
		if err := ctx.Err(); err != nil {
			return removed, err
		}
		c := filepath.ToSlash(filepath.Clean(rel))
		if c == "." || filepath.IsAbs(rel) || hasDotDot(c) || hasGitComponent(c) {
			return removed, fmt.Errorf("%w: the directory %q is not a plain path inside the checkout", ErrHidden, rel)
		}
		dir, err := makeDirs(checkout, strings.Split(c, "/"))
		if err == nil {
			err = emptyDir(dir, c, keep, &removed)
		}
		if err != nil {
			return removed, fmt.Errorf("%w: make %s empty in the checkout: %v", ErrHidden, c, err)
		}
	}
	return removed, nil
}

// emptyDir removes every entry of dir (rel in the checkout) but the
// regular files keep names and the directories on their way. An entry is
// judged by its own type, never followed.
func emptyDir(dir, rel string, keep []string, removed *[]string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := rel + "/" + e.Name()
		switch {
		case e.Type().IsRegular() && slices.Contains(keep, p):
			continue
		case e.IsDir() && slices.ContainsFunc(keep, func(k string) bool { return strings.HasPrefix(k, p+"/") }):
			if err := emptyDir(filepath.Join(dir, e.Name()), p, keep, removed); err != nil {
				return err
			}
			continue
		}
		*removed = append(*removed, p)
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// WriteArchive writes s as a tar (paths, modes and contents as digested)
// for the evidence.
func WriteArchive(w io.Writer, s Set) error {
	tw := tar.NewWriter(w)
	for _, f := range s.Files {
		mode := int64(0o644)
		if f.Exec {
			mode = 0o755
		}
		if err := tw.WriteHeader(&tar.Header{Name: f.Path, Mode: mode, Size: int64(len(f.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// ReadArchive reads an archive WriteArchive wrote (regular files only,
// within the caps) and digests it as Read does: a validator checks the
// evidence's archive against the digest recorded before Case started.
func ReadArchive(r io.Reader) (Set, error) {
	var s Set
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Set{}, fmt.Errorf("%w: archive: %v", ErrHidden, err)
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Name == "" || strings.HasPrefix(hdr.Name, "/") || hasDotDot(hdr.Name) {
			return Set{}, fmt.Errorf("%w: archive entry %q is not a plain relative file", ErrHidden, hdr.Name)
		}
		if len(s.Files) >= MaxFiles || s.Bytes+hdr.Size > MaxBytes {
			return Set{}, fmt.Errorf("%w: archive exceeds %d files or %d bytes", ErrHidden, MaxFiles, MaxBytes)
		}
		data, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			return Set{}, fmt.Errorf("%w: archive: %v", ErrHidden, err)
		}
		s.Bytes += int64(len(data))
		s.Files = append(s.Files, File{Path: hdr.Name, Exec: hdr.Mode&0o111 != 0, data: data})
	}
	sort.Slice(s.Files, func(i, j int) bool { return s.Files[i].Path < s.Files[j].Path })
	s.Digest = digest(s.Files)
	return s, nil
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".." || c == "." || c == "" {
			return true
		}
	}
	return false
}

func digest(files []File) string {
	h := sha256.New()
	for _, f := range files {
		sum := sha256.Sum256(f.data)
		fmt.Fprintf(h, "%s\x00%v\x00%x\n", f.Path, f.Exec, sum)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Again reads the directory a record was made of once more and refuses it
// when it is no longer what was digested before Case started.
func Again(ctx context.Context, rec *ctoharness.HiddenTests) (Set, error) {
	set, err := Read(ctx, rec.Dir)
	if err != nil {
		return Set{}, err
	}
	if set.Digest != rec.Digest {
		return Set{}, fmt.Errorf("%w: %s changed during the run (digest %s before Case, %s now): run again", ErrHidden, rec.Dir, rec.Digest, set.Digest)
	}
	return set, nil
}

// Data is the file's content as read.
func (f File) Data() []byte { return f.data }

// Keep is s with only the files keep says yes to, digested again.
func (s Set) Keep(keep func(File) bool) Set {
	out := Set{Dir: s.Dir}
	for _, f := range s.Files {
		if keep(f) {
			out.Files = append(out.Files, f)
			out.Bytes += int64(len(f.data))
		}
	}
	out.Digest = digest(out.Files)
	return out
}
