package warmcache_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/cto-harness/cto-harness/harness/warmcache"
)

// The host's go is asked from the root: a harness started in a directory
// that was removed since (or one holding a go.work) still finds the caches.
func TestDetectGoFromARemovedDirectory(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command on PATH")
	}
	gone := t.TempDir()
	t.Chdir(gone)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	g, err := warmcache.DetectGo(context.Background(), os.Getenv)
	if err != nil {
		t.Fatalf("from a removed working directory: %v", err)
	}
	if !filepath.IsAbs(g.ModCache) || !filepath.IsAbs(g.BuildCache) {
		t.Fatalf("caches %+v", g)
	}
}
