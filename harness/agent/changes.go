package agent

import (
	"io"
	"io/fs"
	"path/filepath"
	"sort"
	"syscall"

	"github.com/cto-harness/cto-harness/harness/caseworld"
)

// Snapshot is what the fixture's files looked like at one moment (every
// entry outside .git, ignored files included), so that the files a shell
// command changed can be found afterwards.
type Snapshot map[string]stamp

type stamp struct {
	size  int64
	mtime int64
	ctime int64
	ino   uint64
	mode  fs.FileMode
}

// Take walks root with lstat only.
func Take(root string) (Snapshot, error) {
	s := Snapshot{}
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() && de.Name() == ".git" {
			return filepath.SkipDir
		}
		if p == root || de.IsDir() {
			return nil
		}
		fi, err := de.Info()
		if err != nil {
			return err
		}
		st := stamp{size: fi.Size(), mtime: fi.ModTime().UnixNano(), mode: fi.Mode()}
		if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
			st.ctime = sys.Ctim.Nano()
			st.ino = sys.Ino
		}
		rel, _ := filepath.Rel(root, p)
		s[filepath.ToSlash(rel)] = st
		return nil
	})
	return s, err
}

// Changed lists the paths added, removed or changed from before to after, sorted.
func Changed(before, after Snapshot) []string {
	var out []string
	for p, a := range after {
		if b, ok := before[p]; !ok || b != a {
			out = append(out, p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// Holding returns the changed regular files under root that contain a
// secret. Files are read in chunks, so a large file costs no memory.
func (r *Redactor) Holding(root string, paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		// Confined: the fixture is Case's, and a link it left must not make
		// the harness read (and report on) a file outside it.
		f, err := caseworld.Open(root, p)
		if err != nil {
			continue // removed, a link, or not a regular file: nothing to read
		}
		hit, err := r.inReader(f)
		f.Close()
		if err != nil {
			return out, err
		}
		if hit {
			out = append(out, p)
		}
	}
	return out, nil
}

func (r *Redactor) inReader(f io.Reader) (bool, error) {
	longest := 0
	for _, s := range r.secrets {
		longest = max(longest, len(s.Value))
	}
	buf := make([]byte, 0, 64*1024+longest)
	chunk := make([]byte, 64*1024)
	for {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if r.Contains(buf) {
			return true, nil
		}
		if keep := longest - 1; len(buf) > keep {
			buf = append(buf[:0], buf[len(buf)-keep:]...)
		}
		if err == io.EOF {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}
