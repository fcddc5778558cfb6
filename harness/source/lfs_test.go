package source

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

func appendConfig(t *testing.T, repo Repo, text string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(repo.GitDir, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

const lfsConfig = "[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n\tsmudge = git-lfs smudge -- %f\n\tprocess = git-lfs filter-process\n\trequired = true\n"

// With git-lfs configured as its installer does, a smudged LFS file (the
// content where the tree has its pointer) is clean: the status runs the
// clean filter natively, and nothing is refused or run.
func TestProveLFSSmudgedIsClean(t *testing.T) {
	content := "large binary content\x00\n"
	sum := sha256.Sum256([]byte(content))
	ptr := string(gitstatus.LFSPointer(hex.EncodeToString(sum[:]), int64(len(content))))
	repo, r, _ := classified(t, map[string]string{".gitattributes": "*.bin filter=lfs -text\n", "m.bin": ptr})
	appendConfig(t, repo, lfsConfig)
	// Smudge it as git-lfs's checkout does: the index records the stat
	// data of the content, in the same second, so the status must hash it.
	writeFile(t, filepath.Join(repo.Root, "m.bin"), content)
	idx, err := r.Storer.Index()
	if err != nil {
		t.Fatal(err)
	}
	e, err := idx.Entry("m.bin")
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(repo.Root, "m.bin"))
	if err != nil {
		t.Fatal(err)
	}
	e.Size, e.ModifiedAt = uint32(fi.Size()), fi.ModTime()
	if err := r.Storer.SetIndex(idx); err != nil {
		t.Fatal(err)
	}
	p, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindBefore, Now: testNow}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	if !p.StatusClean {
		t.Fatalf("smudged LFS file reads as %+v", p.Status)
	}
	// Other content in its place is a modification.
	writeFile(t, filepath.Join(repo.Root, "m.bin"), "other content\n")
	p, err = Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindBefore, Now: testNow}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	if p.StatusClean {
		t.Fatal("an LFS file with other content reads as clean")
	}
}

// A configured filter driver refuses the source only when a tracked path
// uses it: one named by an ignored directory's .gitattributes is never run.
func TestProveFilterOnlyForTrackedPaths(t *testing.T) {
	repo, _, _ := classified(t, map[string]string{".gitignore": "node_modules/\n", "README": "r\n"})
	appendConfig(t, repo, "[filter \"x\"]\n\tclean = touch ran\n")
	writeFile(t, filepath.Join(repo.Root, "node_modules", "x", ".gitattributes"), "* filter=x\n")
	writeFile(t, filepath.Join(repo.Root, "node_modules", "x", "a.js"), "a\n")
	if _, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindBefore, Now: testNow}, ctoharness.NopTracer{}); err != nil {
		t.Fatalf("a filter no tracked path uses: %v", err)
	}
	writeFile(t, filepath.Join(repo.Root, ".git", "info", "attributes"), "README filter=x\n")
	_, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindBefore, Now: testNow}, ctoharness.NopTracer{})
	if b := blockerOf(t, err); b.Code != ctoharness.BlockSourceFilterConfigured {
		t.Fatalf("tracked README with filter x: %+v, want %s", b, ctoharness.BlockSourceFilterConfigured)
	}
	// A driver named lfs that is not git-lfs as installed is still refused.
	repo2, _, _ := classified(t, map[string]string{".gitattributes": "*.bin filter=lfs\n", "a.bin": "a\n"})
	appendConfig(t, repo2, "[filter \"lfs\"]\n\tclean = sh -c 'touch ran'\n")
	_, err = Prove(context.Background(), repo2, ProofOptions{RunID: "run-1", Kind: KindBefore, Now: testNow}, ctoharness.NopTracer{})
	if b := blockerOf(t, err); b.Code != ctoharness.BlockSourceFilterConfigured {
		t.Fatalf("a custom lfs driver: %+v, want %s", b, ctoharness.BlockSourceFilterConfigured)
	}
}
