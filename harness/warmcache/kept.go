package warmcache

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// A kept layer is Go build cache entries compiled from a source's baseline
// by a harness-run warm-up, kept under the runs directory and shown to
// later verifications as a read-only overlay layer over the host's GOCACHE.
// Only Keep writes one, and only from entries it checks: an output file
// must hash to its own name, an action entry must have Go's exact format.
// A layer that no longer matches its manifest is reported corrupt and
// never shown.

// ErrKeptCorrupt marks a kept layer that does not match its manifest.
var ErrKeptCorrupt = errors.New("the kept Go build cache layer is corrupt")

// KeptRoot is where kept layers live: inside the runs directory, which
// every sandboxed command's view hides.
func KeptRoot(runsDir string) string { return filepath.Join(runsDir, ".cache", "go-build") }

// KeptKey names the layer for one baseline, toolchain and command: parts
// are hashed in order.
func KeptKey(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s\n", len(p), p)
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// Kept is one kept layer.
type Kept struct {
	Layer string `json:"layer"` // the directory shown as the overlay layer
	ID    string `json:"id"`    // sha256 of its manifest
	Files int    `json:"files"`
	Bytes int64  `json:"bytes"`
}

type keptFile struct {
	Name   string `json:"name"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

type manifest struct {
	Version int        `json:"version"`
	Key     string     `json:"key"`
	Files   []keptFile `json:"files"`
}

const manifestName = "manifest.json"

// LayerOf is the layer directory of key, whether or not it exists.
func LayerOf(root, key string) string { return filepath.Join(root, key, "layer") }

// Exists reports whether a layer for key was published (cheap: no
// hashing; OpenKept checks it).
func Exists(root, key string) bool {
	_, err := os.Stat(filepath.Join(root, key, manifestName))
	return err == nil
}

// OpenKept checks the layer for key against its manifest, file by file
// (names, sizes, SHA-256). No layer is an error wrapping fs.ErrNotExist; a
// layer that does not match is ErrKeptCorrupt (the caller removes it).
func OpenKept(root, key string) (Kept, error) {
	dir := filepath.Join(root, key)
	data, err := os.ReadFile(filepath.Join(dir, manifestName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Kept{}, err
		}
		return Kept{}, fmt.Errorf("%w: %s: %v", ErrKeptCorrupt, dir, err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil || m.Version != 1 || m.Key != key {
		return Kept{}, fmt.Errorf("%w: %s: the manifest is not a version 1 manifest for this key (%v)", ErrKeptCorrupt, dir, err)
	}
	k := Kept{Layer: LayerOf(root, key), ID: digest(data), Files: len(m.Files)}
	want := map[string]keptFile{}
	for _, f := range m.Files {
		want[f.Name] = f
		k.Bytes += f.Size
	}
	seen := 0
	err = filepath.WalkDir(k.Layer, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(k.Layer, p)
		if d.IsDir() {
			return nil
		}
		f, ok := want[filepath.ToSlash(rel)]
		if !ok || !d.Type().IsRegular() {
			return fmt.Errorf("%s is not in the manifest", rel)
		}
		sum, size, err := fileSum(p)
		if err != nil {
			return err
		}
		if size != f.Size || sum != f.SHA256 {
			return fmt.Errorf("%s has changed since it was kept", rel)
		}
		seen++
		return nil
	})
	if err == nil && seen != len(want) {
		err = fmt.Errorf("%d of the manifest's %d files are missing", len(want)-seen, len(want))
	}
	if err != nil {
		return Kept{}, fmt.Errorf("%w: %s: %v", ErrKeptCorrupt, dir, err)
	}
	return k, nil
}

// Go's cache entries: <2 hex>/<64 hex>-a (an action entry: action id ->
// output id) and <2 hex>/<64 hex>-d (an output, named by its SHA-256).
var (
	entryName   = regexp.MustCompile(`^([0-9a-f]{2})/([0-9a-f]{64})-([ad])$`)
	actionEntry = regexp.MustCompile(`^v1 ([0-9a-f]{64}) ([0-9a-f]{64}) [ 0-9]{20} [ 0-9-]{20}\n$`)
)

// Keep publishes the build cache entries a warm-up wrote into upper (its
// overlay's writable layer) as the layer for key, and returns it. Only
// well-formed entries are kept; anything else there (the cache's trim
// stamp, a whiteout, a stray file) is left out. A layer another run
// published first for the same key wins.
func Keep(root, key, upper string) (Kept, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return Kept{}, err
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(root, ".new-"+hex.EncodeToString(rnd[:]))
	layer := filepath.Join(tmp, "layer")
	defer os.RemoveAll(tmp)
	m := manifest{Version: 1, Key: key, Files: []keptFile{}}
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(upper, p)
		rel = filepath.ToSlash(rel)
		g := entryName.FindStringSubmatch(rel)
		if g == nil || !strings.HasPrefix(g[2], g[1]) {
			return nil
		}
		dst := filepath.Join(layer, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		sum, size, ok, err := keepEntry(p, dst, g[2], g[3])
		if err != nil || !ok {
			return err
		}
		m.Files = append(m.Files, keptFile{Name: rel, Size: size, SHA256: sum})
		return nil
	})
	if err != nil {
		return Kept{}, fmt.Errorf("cannot keep the build cache entries of %s: %w", upper, err)
	}
	if err := os.MkdirAll(layer, 0o755); err != nil {
		return Kept{}, err
	}
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Name < m.Files[j].Name })
	data, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return Kept{}, err
	}
	if err := os.WriteFile(filepath.Join(tmp, manifestName), data, 0o444); err != nil {
		return Kept{}, err
	}
	if err := os.Rename(tmp, filepath.Join(root, key)); err != nil && !Exists(root, key) {
		return Kept{}, fmt.Errorf("cannot publish the kept build cache layer %s: %w", filepath.Join(root, key), err)
	}
	return OpenKept(root, key)
}

// actionSize is the length of a Go action entry: "v1 ", two hex ids, a
// 20-wide size and a 20-wide time, each after a space, and a newline.
const actionSize = 3 + 64 + 1 + 64 + 1 + 20 + 1 + 20 + 1

// keepEntry copies the cache entry src to dst, hashing it on the way, and
// says whether it was kept: an output file ("d") must hash to id, an
// action entry ("a") must be Go's one line naming id. The entry is never
// read whole (an output file may be as large as the warm-up made it) and
// is opened without following a link or blocking on a FIFO. An entry that
// fails its check leaves nothing at dst.
func keepEntry(src, dst, id, kind string) (sum string, size int64, ok bool, err error) {
	in, err := os.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", 0, false, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return "", 0, false, err
	}
	if kind == "a" {
		if fi.Size() != actionSize {
			return "", 0, false, nil
		}
		data := make([]byte, actionSize+1)
		n, err := io.ReadFull(in, data)
		if err != io.ErrUnexpectedEOF || n != actionSize {
			return "", 0, false, nil // changed size since the stat
		}
		a := actionEntry.FindSubmatch(data[:n])
		if a == nil || string(a[1]) != id {
			return "", 0, false, nil
		}
		s := sha256.Sum256(data[:n])
		return hex.EncodeToString(s[:]), int64(n), true, os.WriteFile(dst, data[:n], 0o444)
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		return "", 0, false, err
	}
	h := sha256.New()
	size, err = io.Copy(io.MultiWriter(h, out), in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	sum = hex.EncodeToString(h.Sum(nil))
	if err != nil || sum != id {
		_ = os.Remove(dst) // a partial or foreign output file
		return "", 0, false, err
	}
	return sum, size, true, nil
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func fileSum(p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
