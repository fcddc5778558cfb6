package natsexec

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
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/store"
)

// Limits on an unpacked result: a worker's tar is hostile input.
const (
	maxTarBytes   = 1 << 30
	maxTarEntries = 100000
)

// ErrUnsafeTar marks a result archive the coordinator will not unpack.
var ErrUnsafeTar = errors.New("unsafe result archive")

var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// pack writes the run directory as a tar stream whose entries are under
// RUNID/. The fixture (Case's working copy) is left out: it is not
// evidence, the run's store holds the commits the validation re-derives
// the change from. A store that shares its closure (store.Closure) is
// sent whole: the closure's objects in its objects directory and no
// alternates, as the coordinator has no closures of its own.
func pack(w io.Writer, runDir string) error {
	runID := filepath.Base(runDir)
	tw := tar.NewWriter(w)
	storeDir := filepath.Join(runDir, evidence.StoreDir)
	closure, err := store.Closure(storeDir)
	if err != nil {
		return err
	}
	alternates := filepath.Join(evidence.StoreDir, "objects", "info", "alternates")
	err = addTree(tw, runDir, runID, func(rel string) bool {
		return rel == evidence.FixtureDir || (closure != "" && rel == alternates)
	})
	if err == nil && closure != "" {
		err = addTree(tw, closure, path.Join(runID, evidence.StoreDir, "objects"), func(string) bool { return false })
	}
	if err != nil {
		return err
	}
	return tw.Close()
}

// addTree writes the directories and regular files under root as tar
// entries under name, but for those skip says to leave out.
func addTree(tw *tar.Writer, root, name string, skip func(rel string) bool) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if skip(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			// The coordinator accepts directories and regular files only.
			return fmt.Errorf("%s is a symbolic link: a run directory sent to the coordinator holds only directories and regular files", p)
		} else if !info.Mode().IsRegular() && !info.IsDir() {
			return nil // sockets, devices: nothing a run's evidence holds
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = path.Join(name, filepath.ToSlash(rel))
		if info.IsDir() {
			h.Name += "/"
		}
		h.Uname, h.Gname, h.Uid, h.Gid = "", "", 0, 0
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
}

// unpack extracts a result archive under dest and returns the run
// directory. Only directories and regular files are accepted (a link, hard
// link, device or FIFO refuses the whole archive, so nothing unpacked can
// lead a later read elsewhere or block it), every name must stay under one
// RUNID/ top directory, nothing is overwritten, and the size and entry
// count are bounded. It stops when ctx is cancelled. It also returns the
// archive's sha256.
func unpack(ctx context.Context, r io.Reader, dest, wantRunID string) (string, string, error) {
	if !runIDPattern.MatchString(wantRunID) {
		return "", "", fmt.Errorf("%w: run id %q is not a plain name", ErrUnsafeTar, wantRunID)
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return "", "", err
	}
	h := sha256.New()
	tr := tar.NewReader(io.TeeReader(r, h))
	var total int64
	root := filepath.Join(dest, wantRunID)
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			return "", "", err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", "", fmt.Errorf("%w: %v", ErrUnsafeTar, err)
		}
		if n >= maxTarEntries {
			return "", "", fmt.Errorf("%w: more than %d entries", ErrUnsafeTar, maxTarEntries)
		}
		name := strings.TrimSuffix(hdr.Name, "/")
		clean := path.Clean(name)
		if clean != name || path.IsAbs(clean) || strings.HasPrefix(clean, "../") || clean == ".." {
			return "", "", fmt.Errorf("%w: entry name %q", ErrUnsafeTar, hdr.Name)
		}
		if clean != wantRunID && !strings.HasPrefix(clean, wantRunID+"/") {
			return "", "", fmt.Errorf("%w: entry %q is outside %s/", ErrUnsafeTar, hdr.Name, wantRunID)
		}
		if clean == path.Join(wantRunID, evidence.StoreDir, "objects", "info", "alternates") {
			// pack sends a store whole; one that borrows objects would have the
			// validation read an objects directory of the coordinator's own.
			return "", "", fmt.Errorf("%w: entry %q makes the run's store borrow objects from outside the archive", ErrUnsafeTar, hdr.Name)
		}
		target := filepath.Join(dest, filepath.FromSlash(clean))
		if err := noLinkOnPath(dest, filepath.Dir(target)); err != nil {
			return "", "", err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.Mkdir(target, 0o755); err != nil && !(errors.Is(err, fs.ErrExist) && isDir(target)) {
				return "", "", fmt.Errorf("%w: %v", ErrUnsafeTar, err)
			}
		case tar.TypeReg:
			total += hdr.Size
			if hdr.Size < 0 || total > maxTarBytes {
				return "", "", fmt.Errorf("%w: more than %d bytes", ErrUnsafeTar, maxTarBytes)
			}
			f, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return "", "", fmt.Errorf("%w: %v", ErrUnsafeTar, err)
			}
			_, err = io.CopyN(f, ctxReader{ctx, tr}, hdr.Size)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return "", "", err
			}
		default:
			return "", "", fmt.Errorf("%w: entry %q has type %q", ErrUnsafeTar, hdr.Name, hdr.Typeflag)
		}
	}
	if _, err := io.Copy(io.Discard, io.TeeReader(r, h)); err != nil { // the digest covers the whole stream
		return "", "", err
	}
	if !isDir(root) {
		return "", "", fmt.Errorf("%w: no %s/ directory", ErrUnsafeTar, wantRunID)
	}
	return root, hex.EncodeToString(h.Sum(nil)), nil
}

// noLinkOnPath makes sure every directory from root down to dir is a real
// directory, not a symbolic link a previous entry planted.
func noLinkOnPath(root, dir string) error {
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return fmt.Errorf("%w: %s is outside %s", ErrUnsafeTar, dir, root)
	}
	p := root
	if rel == "." {
		return nil
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		st, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnsafeTar, err)
		}
		if !st.IsDir() {
			return fmt.Errorf("%w: %s is not a directory (a link?)", ErrUnsafeTar, p)
		}
	}
	return nil
}

// ctxReader stops a long copy at the first cancellation.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func isDir(p string) bool {
	st, err := os.Lstat(p)
	return err == nil && st.IsDir()
}
