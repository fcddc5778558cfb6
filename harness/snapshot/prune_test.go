package snapshot_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/snapshot"
)

func keys(es []snapshot.Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Key)
	}
	slices.Sort(out)
	return out
}

// TestPruneLeastRecentlyUsedBeyondTheCap: prune removes the least recently
// used snapshots until the rest fit the cap, never one a run holds (which
// still counts), and a dry run removes nothing.
func TestPruneLeastRecentlyUsedBeyondTheCap(t *testing.T) {
	root := filepath.Join(t.TempDir(), snapshot.DirName)
	var snaps []*snapshot.Snapshot
	base := time.Now().Add(-time.Hour)
	for i := range 3 {
		files := map[string]string{"README.md": fmt.Sprintf("tree %d\n", i), "docs/a.md": string(make([]byte, 20000+i))}
		s := open(t, input(t, newRepo(t, files), root, nil))
		s.Release()
		used := base.Add(time.Duration(i) * time.Minute) // snaps[0] is the least recently used
		if err := os.Chtimes(s.Dir+".lock", used, used); err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, s)
	}
	// A killed run's half-made snapshot.
	leftover := filepath.Join(root, ".make-"+snaps[1].Key+"-12345")
	if err := os.MkdirAll(filepath.Join(leftover, "tree"), 0o555); err != nil {
		t.Fatal(err)
	}
	// A live run holds the oldest.
	held := open(t, input(t, newRepo(t, map[string]string{"README.md": "tree 0\n", "docs/a.md": string(make([]byte, 20000))}), root, nil))
	if held.Key != snaps[0].Key || held.Made {
		t.Fatalf("the held run opened %s (made %v), want the existing %s", held.Key, held.Made, snaps[0].Key)
	}
	// Its open touched the oldest: make it the oldest again.
	if err := os.Chtimes(held.Dir+".lock", base.Add(-time.Minute), base.Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	one, _ := snapshot.Prune(root, 1<<40, true)
	if len(one.Kept) != 3 || len(one.Removed) != 0 || one.Kept[0].Bytes <= 0 {
		t.Fatalf("under a large cap: %+v", one)
	}
	limit := one.Kept[0].Bytes + one.Kept[1].Bytes + one.Kept[2].Bytes/2 // room for two and a half

	dry, err := snapshot.Prune(root, limit, true)
	if err != nil || !slices.Equal(keys(dry.Removed), []string{snaps[1].Key}) {
		t.Fatalf("dry run: %+v %v, want %s removed", dry, err, snaps[1].Key)
	}
	if _, err := os.Lstat(snaps[1].Dir); err != nil {
		t.Fatalf("the dry run removed %s: %v", snaps[1].Dir, err)
	}

	p, err := snapshot.Prune(root, limit, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(keys(p.Removed), []string{snaps[1].Key}) || !slices.Equal(keys(p.Kept), keys([]snapshot.Entry{{Key: snaps[0].Key}, {Key: snaps[2].Key}})) {
		t.Fatalf("removed %v kept %v; want %s removed and the held %s and the newest %s kept", keys(p.Removed), keys(p.Kept), snaps[1].Key, snaps[0].Key, snaps[2].Key)
	}
	if p.FreedBytes < p.Removed[0].Bytes || !p.Kept[0].Held {
		t.Fatalf("freed %d bytes (removed %d), kept %+v", p.FreedBytes, p.Removed[0].Bytes, p.Kept)
	}
	for _, gone := range []string{snaps[1].Dir, snaps[1].Dir + ".lock", leftover} {
		if _, err := os.Lstat(gone); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", gone, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(held.TreeDir(), "README.md")); err != nil {
		t.Fatalf("the held snapshot lost its files: %v", err)
	}

	// Once the run lets it go, a cap of zero removes everything.
	held.Release()
	all, err := snapshot.Prune(root, 0, false)
	if err != nil || len(all.Removed) != 2 || len(all.Kept) != 0 {
		t.Fatalf("cap 0 after the release: %+v %v", all, err)
	}
}
