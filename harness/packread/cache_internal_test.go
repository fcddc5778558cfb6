package packread

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
)

// TestBaseCacheBoundsManySmallEntries: entries of a few bytes each are
// charged their bookkeeping, so a budget holds at most budget/entryCost of
// them, not every blob of a tree of many small files.
func TestBaseCacheBoundsManySmallEntries(t *testing.T) {
	const budget = 1 << 20
	c := newBaseCache(budget)
	p := &pack{}
	for off := int64(0); off < 20_000; off++ {
		c.put(p, off, plumbing.BlobObject, []byte("tiny"))
	}
	if n, most := len(c.byKey), budget/(entryCost+4); n > most {
		t.Errorf("the cache holds %d entries of 4 bytes with a budget of %d bytes; at most %d fit", n, budget, most)
	}
	if c.used > budget || c.used != len(c.byKey)*(entryCost+4) || c.lru.Len() != len(c.byKey) {
		t.Errorf("used %d for %d entries (%d in the list); budget %d", c.used, len(c.byKey), c.lru.Len(), budget)
	}
	if _, _, ok := c.get(p, 19_999); !ok {
		t.Error("the newest entry was evicted")
	}
	if _, _, ok := c.get(p, 0); ok {
		t.Error("the oldest entry is still held")
	}
}

// TestCacheKeepsBasesNotBlobsReadOnce: a blob stored whole and read for
// itself is not cached (a copy reads each of a tree's blobs once), a tree
// read for itself is, and so is the base a deltified blob was read from.
func TestCacheKeepsBasesNotBlobsReadOnce(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	git("init", "-q", "-b", "main")
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf("line %d of a file that two blobs share", i))
	}
	a := strings.Join(lines, "\n")
	lines[1000] = "the one line the second blob changes"
	for name, content := range map[string]string{"a.txt": a, "b.txt": strings.Join(lines, "\n"), "alone.txt": "nothing is a delta of this"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("add", "-A")
	git("commit", "-q", "-m", "one")
	git("repack", "-adfq")
	// verify-pack: "<id> <type> <size> <packed> <offset> [<depth> <base>]".
	packs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.idx"))
	if len(packs) != 1 {
		t.Fatalf("packs: %v", packs)
	}
	var whole, delta []plumbing.Hash
	var tree plumbing.Hash
	for _, line := range strings.Split(git("verify-pack", "-v", packs[0]), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || len(f[0]) != 40 {
			continue
		}
		switch {
		case f[1] == "tree":
			tree = plumbing.NewHash(f[0])
		case f[1] == "blob" && len(f) == 7:
			delta = append(delta, plumbing.NewHash(f[0]))
		case f[1] == "blob":
			whole = append(whole, plumbing.NewHash(f[0]))
		}
	}
	if len(delta) != 1 || len(whole) != 2 || tree.IsZero() {
		t.Fatalf("the repack made %d deltified and %d whole blobs, tree %s; want 1 and 2", len(delta), len(whole), tree)
	}
	o, err := Open(filepath.Join(dir, ".git", "objects"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for _, h := range whole {
		if _, err := o.Read(h); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(o.cache.byKey); n != 0 {
		t.Errorf("reading %d whole blobs for themselves cached %d entries; want none", len(whole), n)
	}
	if _, err := o.Read(tree); err != nil {
		t.Fatal(err)
	}
	if n := len(o.cache.byKey); n != 1 {
		t.Errorf("reading the tree left %d entries in the cache; want 1", n)
	}
	if _, err := o.Read(delta[0]); err != nil {
		t.Fatal(err)
	}
	blobs := 0
	for _, e := range o.cache.byKey {
		if e.Value.(*cached).t == plumbing.BlobObject {
			blobs++
		}
	}
	if blobs != 2 { // the base the delta was applied to, and the result
		t.Errorf("reading a deltified blob left %d blobs in the cache; want its base and itself", blobs)
	}
}
