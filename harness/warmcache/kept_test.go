package warmcache_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"

	"github.com/cto-harness/cto-harness/harness/warmcache"
)

func put(t *testing.T, dir, rel, data string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Keep takes only well-formed Go cache entries from a warm-up's layer, and
// OpenKept refuses a layer that changed after it was kept.
func TestKeepAndOpen(t *testing.T) {
	upper, root := t.TempDir(), t.TempDir()
	out := "compiled package\n"
	sum := sha256.Sum256([]byte(out))
	outID := hex.EncodeToString(sum[:])
	actID := "ab" + outID[2:]
	put(t, upper, outID[:2]+"/"+outID+"-d", out)
	put(t, upper, "ab/"+actID+"-a", fmt.Sprintf("v1 %s %s %20d %20d\n", actID, outID, len(out), 1700000000000000000))
	put(t, upper, "cd/cd"+outID[2:]+"-d", "not what the name says\n")             // an output that does not hash to its name
	put(t, upper, "ef/ef"+outID[2:]+"-a", "v1 planted\n")                         // not an action entry
	put(t, upper, "ab/"+outID[:2]+outID[2:]+"-a", "v1 "+actID+" "+outID+" 1 1\n") // the wrong directory and format
	put(t, upper, "trim.txt", "1700000000\n")                                     // the cache's own stamp
	if _, err := warmcache.OpenKept(root, "k1"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("no layer yet: %v", err)
	}
	k, err := warmcache.Keep(root, "k1", upper)
	if err != nil {
		t.Fatal(err)
	}
	if k.Files != 2 || k.Layer != warmcache.LayerOf(root, "k1") || k.ID == "" {
		t.Fatalf("kept %+v; want the two well-formed entries", k)
	}
	again, err := warmcache.OpenKept(root, "k1")
	if err != nil || again != k {
		t.Fatalf("reopened: %+v, %v; want %+v", again, err, k)
	}
	if !warmcache.Exists(root, "k1") || warmcache.Exists(root, "k2") {
		t.Error("Exists does not tell the published layer from a missing one")
	}
	// A second warm-up for the same key finds the first one's layer.
	if k2, err := warmcache.Keep(root, "k1", upper); err != nil || k2 != k {
		t.Errorf("a second Keep: %+v, %v", k2, err)
	}
	p := filepath.Join(k.Layer, outID[:2], outID+"-d")
	os.Chmod(p, 0o644)
	if err := os.WriteFile(p, []byte("changed afterwards\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := warmcache.OpenKept(root, "k1"); !errors.Is(err, warmcache.ErrKeptCorrupt) {
		t.Errorf("a changed entry: %v; want ErrKeptCorrupt", err)
	}
	os.Remove(p)
	put(t, k.Layer, "zz/extra", "x")
	if _, err := warmcache.OpenKept(root, "k1"); !errors.Is(err, warmcache.ErrKeptCorrupt) {
		t.Errorf("a missing and an extra entry: %v; want ErrKeptCorrupt", err)
	}
}

// Keep streams each entry: a large output file is kept whole and checked
// against its name; one that does not hash to its name, an action entry
// with a byte more than Go writes, a FIFO and a symlink named like entries
// leave nothing in the layer.
func TestKeepStreamsAndChecksEveryEntry(t *testing.T) {
	upper, root := t.TempDir(), t.TempDir()
	big := make([]byte, 24<<20)
	for i := range big {
		big[i] = byte(i * 7)
	}
	sum := sha256.Sum256(big)
	bigID := hex.EncodeToString(sum[:])
	put(t, upper, bigID[:2]+"/"+bigID+"-d", string(big))
	badID := "cd" + bigID[2:]
	put(t, upper, "cd/"+badID+"-d", string(big[:1<<20])) // does not hash to its name
	actID := "ab" + bigID[2:]
	put(t, upper, "ab/"+actID+"-a", fmt.Sprintf("v1 %s %s %20d %20d\n ", actID, bigID, len(big), 1700000000000000000))
	fifoID, linkID := "ef"+bigID[2:], "01"+bigID[2:]
	if err := os.MkdirAll(filepath.Join(upper, "ef"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(upper, "ef", fifoID+"-d"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(upper, "01"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(upper, bigID[:2], bigID+"-d"), filepath.Join(upper, "01", linkID+"-d")); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	k, err := warmcache.Keep(root, "k", upper)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatal(err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 4<<20 {
		t.Errorf("Keep allocated %d bytes for a %d-byte entry: it must stream, not read entries whole", alloc, len(big))
	}
	if k.Files != 1 || k.Bytes != int64(len(big)) {
		t.Fatalf("kept %+v; want only the large output file, %d bytes", k, len(big))
	}
	got, err := os.ReadFile(filepath.Join(k.Layer, bigID[:2], bigID+"-d"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("the kept output file differs from the warm-up's (%v)", err)
	}
	for _, rel := range []string{"cd/" + badID + "-d", "ab/" + actID + "-a", "ef/" + fifoID + "-d", "01/" + linkID + "-d"} {
		if _, err := os.Lstat(filepath.Join(k.Layer, filepath.FromSlash(rel))); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s is in the kept layer (%v)", rel, err)
		}
	}
}
