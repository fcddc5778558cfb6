package source

import (
	"bytes"
	"compress/zlib"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed")
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// A local `git clone` of the source hard-links its object files, which
// changes their ctime and link count but not a byte: recorded as benign,
// not a mutation. The source has loose objects and a pack.
func TestCompareLocalCloneIsBenign(t *testing.T) {
	repo, r, _ := classified(t, map[string]string{"README.md": "hello\n", "a/b.txt": "b\n"})
	gitRun(t, repo.Root, "repack", "-q")
	commitFiles(t, r, repo.Root, map[string]string{"c.txt": "loose\n"}, "second")
	before := prove(t, repo, KindBefore, false)
	time.Sleep(10 * time.Millisecond) // a ctime the clone's link visibly changes
	gitRun(t, filepath.Dir(repo.Root), "clone", "-q", "--local", repo.Root, "clone")
	before.Pack() // as a run holds it, so the packed form is what is read
	after, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindAfter, Now: testNow}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	MarkVerifiedObjects(repo, before, &after)
	nm := Compare("run-1", before, after)
	if nm.Mutated {
		t.Fatalf("a local clone counted as a mutation: %+v", nm.Differences)
	}
	var pack, loose bool
	for _, b := range nm.Benign {
		pack = pack || strings.HasSuffix(b.Path, ".pack")
		loose = loose || !strings.Contains(b.Path, "/pack/")
	}
	if !pack || !loose {
		t.Fatalf("benign changes %+v should name a pack and a loose object", nm.Benign)
	}
}

// A loose object rewritten with other content and its mtime put back
// differs in ctime only, but its content no longer matches its name.
func TestCompareRewrittenObjectIsMutation(t *testing.T) {
	repo, _, _ := classified(t, map[string]string{"README.md": "hello\n"})
	before := prove(t, repo, KindBefore, false)
	// The blob of README.md, which nothing reads while the worktree's
	// stat data vouches for it.
	p := filepath.Join(repo.Root, ".git/objects/ce/013625030ba8dba906f756967f9e9ca394464a")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := zlib.NewWriter(&buf)
	zw.Write([]byte("blob 6\x00HELLO\n"))
	zw.Close()
	data := buf.Bytes()
	if int64(len(data)) != fi.Size() {
		// Keep the size: pad or trim the compressed stream's tail, which
		// still leaves content that cannot hash to the name.
		data = append(data, make([]byte, max(0, int(fi.Size())-len(data)))...)[:fi.Size()]
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
	os.Chmod(p, fi.Mode().Perm())
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	after, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindAfter, Now: testNow}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	MarkVerifiedObjects(repo, before, &after)
	nm := Compare("run-1", before, after)
	if !nm.Mutated || len(nm.Benign) != 0 {
		t.Fatalf("rewritten object: mutated=%v benign=%+v, want a mutation", nm.Mutated, nm.Benign)
	}
}
