package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	ctoharness "github.com/cto-harness/cto-harness"
)

var testNow = time.Date(2025, 6, 7, 8, 9, 10, 0, time.FixedZone("X", 3600))

// classified builds a committed repository under an owned root and returns
// it classified, as the pipeline would.
func classified(t testing.TB, files map[string]string) (Repo, *git.Repository, plumbing.Hash) {
	t.Helper()
	base := realTempDir(t)
	dir := filepath.Join(base, "repo")
	r, h := initRepo(t, dir, files)
	repo, err := Classify(context.Background(), dir, Policy{Owned: []string{base}}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	return repo, r, h
}

func prove(t testing.TB, repo Repo, kind string, deep bool) ctoharness.SourceProof {
	t.Helper()
	p, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: kind, Deep: deep, Now: testNow}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func entry(t *testing.T, p ctoharness.SourceProof, path string) ctoharness.ManifestEntry {
	t.Helper()
	for _, e := range p.Manifest {
		if e.Path == path {
			return e
		}
	}
	t.Fatalf("manifest has no entry %q", path)
	return ctoharness.ManifestEntry{}
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestProveClean(t *testing.T) {
	repo, r, head := classified(t, map[string]string{
		"a.txt":      "alpha\n",
		"dir/b.txt":  "bravo bravo\n",
		".gitignore": "*.log\n",
	})
	symlink(t, "a.txt", filepath.Join(repo.Root, "link"))
	commitFiles(t, r, repo.Root, nil, "add link")
	head2, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	if head2.Hash() == head {
		t.Fatal("second commit did not move HEAD")
	}
	writeFile(t, filepath.Join(repo.Root, "debug.log"), "ignored\n") // ignored: in the manifest, not in status

	rec := &recorder{}
	home := realTempDir(t)
	writeFile(t, filepath.Join(home, ".gitconfig"), "[core]\n\texcludesFile = ~/ignore\n")
	writeFile(t, filepath.Join(home, "ignore"), "*.tmp\n")
	env := map[string]string{"HOME": home, "GIT_CONFIG_NOSYSTEM": "1"}
	p, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindBefore, Deep: true, Now: testNow,
		Getenv: func(k string) string { return env[k] }}, rec)
	if err != nil {
		t.Fatal(err)
	}

	commit, err := r.CommitObject(head2.Hash())
	if err != nil {
		t.Fatal(err)
	}
	wantHead := ctoharness.HeadState{SymbolicRef: "refs/heads/main", Commit: head2.Hash().String(), Tree: commit.TreeHash.String()}
	if p.Head != wantHead {
		t.Errorf("head = %+v, want %+v", p.Head, wantHead)
	}
	wantRefs := sha("HEAD refs/heads/main\nrefs/heads/main " + head2.Hash().String() + "\n")
	if p.RefsDigest != wantRefs || p.RefCount != 2 {
		t.Errorf("refs = %s (%d), want %s (2)", p.RefsDigest, p.RefCount, wantRefs)
	}
	if !p.StatusClean || len(p.Status) != 0 {
		t.Errorf("status = clean %v %v, want clean and empty", p.StatusClean, p.Status)
	}
	if p.SchemaVersion != ctoharness.SchemaVersion || p.RunID != "run-1" || p.Kind != KindBefore || p.Root != repo.Root || !p.Deep {
		t.Errorf("header fields wrong: %+v", p)
	}
	if !p.TakenAt.Equal(testNow) || p.TakenAt.Location() != time.UTC {
		t.Errorf("taken_at = %v, want %v in UTC", p.TakenAt, testNow)
	}

	// Manifest: sorted, complete (.git and ignored files included), and
	// matching what os.Lstat says.
	if !slices.IsSortedFunc(p.Manifest, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) }) {
		t.Error("manifest not sorted by path")
	}
	if p.Manifest[0].Path != "." || p.Manifest[0].Type != ctoharness.EntryDir {
		t.Errorf("first entry = %+v, want the root directory", p.Manifest[0])
	}
	var count int
	err = filepath.WalkDir(repo.Root, func(string, fs.DirEntry, error) error { count++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Manifest) != count {
		t.Errorf("manifest has %d entries, filepath.WalkDir sees %d", len(p.Manifest), count)
	}
	for _, path := range []string{".git", ".git/HEAD", ".git/index", ".git/refs/heads/main", "debug.log", "dir", "dir/b.txt"} {
		entry(t, p, path)
	}
	a := entry(t, p, "a.txt")
	fi, err := os.Lstat(filepath.Join(repo.Root, "a.txt"))
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	_, ctime := statTimes(st)
	want := ctoharness.ManifestEntry{
		Path: "a.txt", Type: ctoharness.EntryFile, Mode: uint32(fi.Mode()), Size: 6,
		MtimeNs: fi.ModTime().UnixNano(), CtimeNs: ctime, Inode: st.Ino, EntryExtra: &ctoharness.EntryExtra{Digest: sha("alpha\n")},
		Dev: uint64(st.Dev), UID: st.Uid, GID: st.Gid,
	}
	if !a.Equal(want) {
		t.Errorf("a.txt = %+v, want %+v", a, want)
	}
	if a.Mode&0o777 != 0o644 {
		t.Errorf("a.txt perm = %o, want 644", a.Mode&0o777)
	}
	if d := entry(t, p, "dir"); fs.FileMode(d.Mode)&fs.ModeDir == 0 || d.SHA256() != "" {
		t.Errorf("dir entry = %+v", d)
	}
	if l := entry(t, p, "link"); l.Type != ctoharness.EntrySymlink || l.Target() != "a.txt" || l.SHA256() != "" {
		t.Errorf("link entry = %+v, want symlink to a.txt without hash", l)
	}
	if p.ManifestDigest != ManifestDigest(p.Manifest) || len(p.ManifestDigest) != 64 {
		t.Errorf("manifest digest %q does not match its entries", p.ManifestDigest)
	}

	// One trace entry for git, one for the walk — not one per file — and
	// one per file read outside the repository (the global configuration
	// and the excludes file it names).
	wantTrace := []traced{{ctoharness.TraceGitRead, repo.GitDir}, {ctoharness.TraceWalk, repo.Root},
		{ctoharness.TraceRead, filepath.Join(home, ".gitconfig")}, {ctoharness.TraceRead, filepath.Join(home, "ignore")}}
	if !slices.Equal(rec.entries, wantTrace) {
		t.Errorf("trace = %v, want %v", rec.entries, wantTrace)
	}

	// Shallow proofs carry no hashes.
	for _, e := range prove(t, repo, KindAfter, false).Manifest {
		if e.SHA256() != "" {
			t.Fatalf("shallow proof hashed %s", e.Path)
		}
	}
}

func TestProveDirty(t *testing.T) {
	repo, r, _ := classified(t, map[string]string{"a.txt": "alpha\n", "b.txt": "bravo\n", "gone.txt": "x\n"})
	writeFile(t, filepath.Join(repo.Root, "a.txt"), "alpha changed\n")
	writeFile(t, filepath.Join(repo.Root, "new.txt"), "new\n")
	writeFile(t, filepath.Join(repo.Root, "staged.txt"), "staged\n")
	if err := os.Remove(filepath.Join(repo.Root, "gone.txt")); err != nil {
		t.Fatal(err)
	}
	w, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Add("staged.txt"); err != nil {
		t.Fatal(err)
	}

	p := prove(t, repo, KindBefore, false)
	want := []ctoharness.StatusEntry{
		{Path: "a.txt", Staging: " ", Worktree: "M"},
		{Path: "gone.txt", Staging: " ", Worktree: "D"},
		{Path: "new.txt", Staging: "?", Worktree: "?"},
		{Path: "staged.txt", Staging: "A", Worktree: " "},
	}
	if p.StatusClean {
		t.Error("dirty repository reported clean")
	}
	if !slices.Equal(p.Status, want) {
		t.Errorf("status = %+v, want %+v", p.Status, want)
	}
}

func TestProveDetachedHead(t *testing.T) {
	repo, _, head := classified(t, map[string]string{"a.txt": "a\n"})
	writeFile(t, filepath.Join(repo.GitDir, "HEAD"), head.String()+"\n")
	p := prove(t, repo, KindBefore, false)
	if p.Head.SymbolicRef != "" || p.Head.Commit != head.String() || p.Head.Tree == "" {
		t.Errorf("detached head = %+v, want no symbolic ref and commit %s", p.Head, head)
	}
	if want := sha("HEAD " + head.String() + "\nrefs/heads/main " + head.String() + "\n"); p.RefsDigest != want {
		t.Errorf("refs digest = %s, want %s", p.RefsDigest, want)
	}
}

func TestProveRefusals(t *testing.T) {
	t.Run("unborn HEAD", func(t *testing.T) {
		base := realTempDir(t)
		dir := filepath.Join(base, "empty")
		if _, err := git.PlainInit(dir, false); err != nil {
			t.Fatal(err)
		}
		repo, err := Classify(context.Background(), dir, Policy{Owned: []string{base}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Prove(context.Background(), repo, ProofOptions{Kind: KindAfter, Now: testNow}, nil)
		b := blockerOf(t, err)
		if b.Code != ctoharness.BlockSourceUnreadable || b.Step != ctoharness.StepSourceAfter {
			t.Fatalf("blocker = %+v, want %s at %s", b, ctoharness.BlockSourceUnreadable, ctoharness.StepSourceAfter)
		}
		if !strings.Contains(b.Message, "no commits; commit something first") {
			t.Errorf("message %q does not say what to do", b.Message)
		}
	})
	t.Run("caller-chosen step", func(t *testing.T) {
		base := realTempDir(t)
		dir := filepath.Join(base, "empty")
		if _, err := git.PlainInit(dir, false); err != nil {
			t.Fatal(err)
		}
		repo := Repo{Given: dir, Root: dir, GitDir: dir + "/.git"}
		_, err := Prove(context.Background(), repo, ProofOptions{Kind: KindBefore, Step: ctoharness.StepBaseline}, nil)
		if b := blockerOf(t, err); b.Step != ctoharness.StepBaseline {
			t.Fatalf("step = %s, want %s", b.Step, ctoharness.StepBaseline)
		}
	})
	t.Run("bad kind", func(t *testing.T) {
		repo, _, _ := classified(t, map[string]string{"a": "a"})
		_, err := Prove(context.Background(), repo, ProofOptions{Kind: "during"}, nil)
		if b := blockerOf(t, err); b.Code != ctoharness.BlockInternal || b.Step != ctoharness.StepSourceProof {
			t.Fatalf("blocker = %+v", b)
		}
	})
	t.Run("unclassified repo", func(t *testing.T) {
		_, err := Prove(context.Background(), Repo{Root: "relative"}, ProofOptions{Kind: KindBefore}, nil)
		if b := blockerOf(t, err); b.Code != ctoharness.BlockInternal {
			t.Fatalf("blocker = %+v", b)
		}
	})
	t.Run("canceled", func(t *testing.T) {
		repo, _, _ := classified(t, map[string]string{"a": "a"})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := Prove(ctx, repo, ProofOptions{Kind: KindBefore}, nil); err == nil {
			t.Fatal("Prove with a canceled context succeeded")
		}
	})
}

// TestProveWritesNothing proves Prove itself is read-only: repeated proofs,
// deep and shallow, leave every lstat field of every entry unchanged,
// ctime included, and .git/index byte-for-byte identical. The dirty,
// just-written worktree forces go-git to hash files (racy-git window), the
// path on which a careless status would refresh the index.
func TestProveWritesNothing(t *testing.T) {
	repo, _, _ := classified(t, map[string]string{"a.txt": "alpha\n", "sub/b.txt": "bravo\n"})
	writeFile(t, filepath.Join(repo.Root, "a.txt"), "alpha modified\n")
	writeFile(t, filepath.Join(repo.Root, "untracked.txt"), "u\n")

	index := filepath.Join(repo.GitDir, "index")
	indexBytes, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	indexCtime := ctimeOf(t, index)

	first := prove(t, repo, KindBefore, false)
	firstDeep := prove(t, repo, KindBefore, true)
	second := prove(t, repo, KindAfter, false)
	secondDeep := prove(t, repo, KindAfter, true)

	for _, pair := range [][2]ctoharness.SourceProof{{first, second}, {firstDeep, secondDeep}} {
		if !slices.EqualFunc(pair[0].Manifest, pair[1].Manifest, ctoharness.ManifestEntry.Equal) {
			nm := Compare("run-1", pair[0], pair[1])
			t.Fatalf("manifest changed between proofs: %+v", nm.Differences)
		}
		if pair[0].ManifestDigest != pair[1].ManifestDigest {
			t.Fatal("manifest digest not deterministic")
		}
		if nm := Compare("run-1", pair[0], pair[1]); nm.Mutated {
			t.Fatalf("Compare reports mutation: %+v", nm)
		}
	}
	// Deep and shallow walks see the same lstat data.
	for i := range first.Manifest {
		e := firstDeep.Manifest[i]
		e.SetSHA256("")
		if !e.Equal(first.Manifest[i]) {
			t.Fatalf("deep walk saw %+v, shallow saw %+v", e, first.Manifest[i])
		}
	}

	after, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(after, indexBytes) {
		t.Error(".git/index bytes changed")
	}
	if c := ctimeOf(t, index); c != indexCtime {
		t.Errorf(".git/index ctime changed: %d -> %d", indexCtime, c)
	}
	if first.StatusClean {
		t.Error("test setup: expected a dirty status")
	}
}

func ctimeOf(t *testing.T, p string) int64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	_, c := statTimes(&st)
	return c
}

func TestManifestDigestCanonical(t *testing.T) {
	e := []ctoharness.ManifestEntry{{Path: "a", Type: ctoharness.EntryFile, Mode: 420, Size: 1, MtimeNs: 2, CtimeNs: 3, Inode: 4, EntryExtra: &ctoharness.EntryExtra{Digest: "ab"}}}
	want := sha(manifestHeader + "a\x00file\x00420\x001\x002\x003\x004\x00\x00ab\x00")
	if got := ManifestDigest(e); got != want {
		t.Fatalf("ManifestDigest = %s, want %s", got, want)
	}
	// Moving a byte between fields changes the digest.
	e2 := []ctoharness.ManifestEntry{{Path: "a", Type: ctoharness.EntryFile, Mode: 420, Size: 1, MtimeNs: 2, CtimeNs: 3, Inode: 4, EntryExtra: &ctoharness.EntryExtra{LinkTarget: "ab"}}}
	if ManifestDigest(e2) == want {
		t.Fatal("target and sha256 fields are not separated")
	}
	if ManifestDigest(nil) != sha(manifestHeader) {
		t.Fatal("empty manifest digest is not the header hash")
	}
}

func TestFileModeMatchesOS(t *testing.T) {
	dir := realTempDir(t)
	paths := map[string]func(p string) error{
		"file":   func(p string) error { return os.WriteFile(p, nil, 0o640) },
		"dir":    func(p string) error { return os.Mkdir(p, 0o750) },
		"link":   func(p string) error { return os.Symlink("file", p) },
		"fifo":   func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"sticky": func(p string) error { return os.Mkdir(p, 0o700|os.ModeSticky) },
	}
	for name, mk := range paths {
		p := filepath.Join(dir, name)
		if err := mk(p); err != nil {
			t.Fatal(err)
		}
		if name == "sticky" {
			if err := os.Chmod(p, 0o700|os.ModeSticky); err != nil {
				t.Fatal(err)
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		raw := fi.Sys().(*syscall.Stat_t).Mode
		if got := fileMode(uint32(raw)); got != fi.Mode() {
			t.Errorf("%s: fileMode = %v, os says %v", name, got, fi.Mode())
		}
	}
}

// separateClassified is classified for a worktree whose git directory was
// moved out of it (git init --separate-git-dir), outside the owned root.
func separateClassified(t testing.TB, files map[string]string) Repo {
	t.Helper()
	base := realTempDir(t)
	dir := filepath.Join(base, "owned", "repo")
	initRepo(t, dir, files)
	gd := filepath.Join(base, "elsewhere", "repo.git")
	if err := os.MkdirAll(filepath.Dir(gd), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, ".git"), gd); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, ".git"), "gitdir: "+gd+"\n")
	repo, err := Classify(context.Background(), dir, Policy{Owned: []string{filepath.Join(base, "owned")}}, ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

// TestProveSeparateGitDir: the proof of a worktree whose git directory is
// kept elsewhere covers that directory as .git/ (its root as .git/.), keeps
// the gitfile as .git, says where it read it (git_dir), is clean, and a
// change in either place (a new ref, an object file's bytes, the gitfile
// repointed) makes Compare report a mutation.
func TestProveSeparateGitDir(t *testing.T) {
	repo := separateClassified(t, map[string]string{"a.txt": "alpha\n", "dir/b.txt": "bravo\n"})
	before := prove(t, repo, KindBefore, false)
	if before.GitDir != repo.GitDir || before.Root != repo.Root {
		t.Fatalf("proof root %s git_dir %s; want %s and %s", before.Root, before.GitDir, repo.Root, repo.GitDir)
	}
	if !before.StatusClean {
		t.Fatalf("a clean separate-git-dir worktree has status %v", before.Status)
	}
	if e := entry(t, before, ".git"); e.Type != ctoharness.EntryFile {
		t.Errorf(".git is %s, want the gitfile (file)", e.Type)
	}
	if e := entry(t, before, ".git/."); e.Type != ctoharness.EntryDir {
		t.Errorf(".git/. is %s, want the git directory (dir)", e.Type)
	}
	entry(t, before, ".git/HEAD")
	if !slices.IsSortedFunc(before.Manifest, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) }) {
		t.Fatal("the merged manifest is not sorted by path")
	}
	if again := prove(t, repo, KindAfter, false); Compare("run-1", before, again).Mutated {
		t.Fatalf("two proofs of an untouched source differ: %+v", Compare("run-1", before, again).Differences)
	}

	var loose string
	for _, e := range before.Manifest {
		if immutableObject.MatchString(e.Path) {
			loose = e.Path
			break
		}
	}
	if loose == "" {
		t.Fatal("no loose object in the manifest")
	}
	for _, tc := range []struct {
		name   string
		mutate func(t *testing.T)
		path   string
	}{
		{"a new ref", func(t *testing.T) {
			head, _ := os.ReadFile(filepath.Join(repo.GitDir, "refs", "heads", "main"))
			writeFile(t, filepath.Join(repo.GitDir, "refs", "heads", "other"), string(head))
		}, ".git/refs/heads/other"},
		{"an object's bytes", func(t *testing.T) {
			p := repo.HostPath(loose)
			if err := os.Chmod(p, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte("x"))
			f.Close()
		}, loose},
		{"the gitfile", func(t *testing.T) {
			writeFile(t, filepath.Join(repo.Root, ".git"), "gitdir: "+repo.GitDir+"/\n")
		}, ".git"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.mutate(t)
			after, err := Prove(context.Background(), repo, ProofOptions{RunID: "run-1", Kind: KindAfter, Now: testNow}, ctoharness.NopTracer{})
			if err != nil {
				t.Fatal(err)
			}
			MarkVerifiedObjects(repo, before, &after)
			nm := Compare("run-1", before, after)
			if !nm.Mutated || !slices.ContainsFunc(nm.Differences, func(d ctoharness.Difference) bool { return d.Path == tc.path }) {
				t.Fatalf("mutation of %s not reported: %+v", tc.path, nm.Differences)
			}
		})
	}
}
