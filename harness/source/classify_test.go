package source

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"

	ctoharness "github.com/cto-harness/cto-harness"
)

// layout is the directory structure every classification test starts from:
//
//	base/owned/repo        a committed repository (the good source)
//	base/target/repo       a repository inside the target root
//	base/external/repo     a repository inside the external root
//	base/elsewhere/repo    a repository outside every owned root
type layout struct {
	base, owned, target, external, elsewhere string
}

func newLayout(t *testing.T) layout {
	t.Helper()
	base := realTempDir(t)
	l := layout{
		base:      base,
		owned:     filepath.Join(base, "owned"),
		target:    filepath.Join(base, "target"),
		external:  filepath.Join(base, "external"),
		elsewhere: filepath.Join(base, "elsewhere"),
	}
	for _, d := range []string{l.owned, l.target, l.external, l.elsewhere} {
		initRepo(t, filepath.Join(d, "repo"), map[string]string{"README.md": "hello\n"})
	}
	return l
}

func (l layout) policy() Policy {
	return Policy{Owned: []string{l.owned}, TargetRoots: []string{l.target}, ExternalRoots: []string{l.external}}
}

func TestClassifyRefusals(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, l layout) string // returns the path to classify
		pol   func(l layout) Policy               // nil means l.policy()
		code  ctoharness.BlockerCode
		// fenced roots the trace must not contain (beyond target and external).
		untouched func(l layout) []string
	}{
		{name: "https url", setup: fixed("https://github.com/o/r.git"), code: ctoharness.BlockSourceNotLocal},
		{name: "ssh url", setup: fixed("ssh://git@host/o/r.git"), code: ctoharness.BlockSourceNotLocal},
		{name: "scp-like remote", setup: fixed("git@github.com:o/r.git"), code: ctoharness.BlockSourceNotLocal},
		{name: "host:path remote", setup: fixed("buildhost:src/r"), code: ctoharness.BlockSourceNotLocal},
		{name: "file url", setup: fixed("file:///srv/git/r.git"), code: ctoharness.BlockSourceNotLocal},
		{
			name:  "file url into target root",
			setup: func(t *testing.T, l layout) string { return "file://" + l.target + "/repo" },
			code:  ctoharness.BlockSourceIsTarget,
		},
		{name: "empty path", setup: fixed(""), code: ctoharness.BlockSourceNotFound},
		{
			name:  "missing",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.owned, "missing") },
			code:  ctoharness.BlockSourceNotFound,
		},
		{
			name:  "missing parent",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.owned, "nope", "deeper") },
			code:  ctoharness.BlockSourceNotFound,
		},
		{
			name: "path under a file",
			setup: func(t *testing.T, l layout) string {
				return filepath.Join(l.owned, "repo", "README.md", "x")
			},
			code: ctoharness.BlockSourceNotFound,
		},
		{
			name: "given path is a symlink outside the owned roots",
			setup: func(t *testing.T, l layout) string {
				symlink(t, filepath.Join(l.elsewhere, "repo"), filepath.Join(l.owned, "link"))
				return filepath.Join(l.owned, "link")
			},
			code: ctoharness.BlockSourceNotOwned,
		},
		{
			name: "given path is a symlink to a file",
			setup: func(t *testing.T, l layout) string {
				symlink(t, filepath.Join(l.owned, "repo", "README.md"), filepath.Join(l.owned, "link"))
				return filepath.Join(l.owned, "link")
			},
			code: ctoharness.BlockSourceNotGit,
		},
		{
			name: "given path is a symlink loop",
			setup: func(t *testing.T, l layout) string {
				symlink(t, "loopb", filepath.Join(l.owned, "loopa"))
				symlink(t, "loopa", filepath.Join(l.owned, "loopb"))
				return filepath.Join(l.owned, "loopa")
			},
			code: ctoharness.BlockSourceSymlink,
		},
		{
			name: "given path is a symlink into the target root",
			setup: func(t *testing.T, l layout) string {
				symlink(t, filepath.Join(l.target, "repo"), filepath.Join(l.owned, "link"))
				return filepath.Join(l.owned, "link")
			},
			code: ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "the .git directory itself",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.owned, "repo", ".git") },
			code:  ctoharness.BlockSourceNotGit,
		},
		{
			name:  "subdirectory of a worktree",
			setup: func(t *testing.T, l layout) string { p := filepath.Join(l.owned, "repo", "sub"); mkdir(t, p); return p },
			code:  ctoharness.BlockSourceNotGit,
		},
		{
			name: "parent symlink loop",
			setup: func(t *testing.T, l layout) string {
				symlink(t, "loop2", filepath.Join(l.owned, "loop1"))
				symlink(t, "loop1", filepath.Join(l.owned, "loop2"))
				return filepath.Join(l.owned, "loop1", "repo")
			},
			code: ctoharness.BlockSourceSymlink,
		},
		{
			name: "parent symlink into target root (absolute link)",
			setup: func(t *testing.T, l layout) string {
				symlink(t, l.target, filepath.Join(l.owned, "lnk"))
				return filepath.Join(l.owned, "lnk", "repo")
			},
			code: ctoharness.BlockSourceIsTarget,
		},
		{
			name: "parent symlink into target root (relative link)",
			setup: func(t *testing.T, l layout) string {
				symlink(t, "../target", filepath.Join(l.owned, "lnk"))
				return filepath.Join(l.owned, "lnk", "repo")
			},
			code: ctoharness.BlockSourceIsTarget,
		},
		{
			name: "parent symlink into target root, missing leaf",
			setup: func(t *testing.T, l layout) string {
				symlink(t, l.target, filepath.Join(l.owned, "lnk"))
				return filepath.Join(l.owned, "lnk", "does-not-exist")
			},
			code: ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "under target root given directly",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.target, "repo") },
			code:  ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "target root itself",
			setup: func(t *testing.T, l layout) string { return l.target },
			code:  ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "under target root but missing (target wins over not found)",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.target, "nothing", "here") },
			code:  ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "under target root through dot-dot",
			setup: func(t *testing.T, l layout) string { return l.owned + "/../target/repo" },
			code:  ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "under external root",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.external, "repo") },
			code:  ctoharness.BlockSourceExternal,
		},
		{
			name: "parent symlink into external root",
			setup: func(t *testing.T, l layout) string {
				symlink(t, l.external, filepath.Join(l.owned, "ext"))
				return filepath.Join(l.owned, "ext", "repo")
			},
			code: ctoharness.BlockSourceExternal,
		},
		{
			name: "target root reached through a symlinked ancestor of the configured root",
			setup: func(t *testing.T, l layout) string {
				symlink(t, l.base, filepath.Join(l.base, "alias"))
				return filepath.Join(l.target, "repo") // physical path; the root is configured via alias
			},
			pol: func(l layout) Policy {
				return Policy{Owned: []string{l.base}, TargetRoots: []string{filepath.Join(l.base, "alias", "target")}}
			},
			code: ctoharness.BlockSourceIsTarget,
		},
		{
			name:  "source contains the target root",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.owned, "repo") },
			pol: func(l layout) Policy {
				return Policy{Owned: []string{l.owned}, TargetRoots: []string{filepath.Join(l.owned, "repo", "vendor", "t")}}
			},
			code: ctoharness.BlockSourceIsTarget,
			untouched: func(l layout) []string {
				return []string{filepath.Join(l.owned, "repo", "vendor", "t")}
			},
		},
		{
			name:  "source contains an external root",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.owned, "repo") },
			pol: func(l layout) Policy {
				return Policy{Owned: []string{l.owned}, ExternalRoots: []string{filepath.Join(l.owned, "repo", "third_party")}}
			},
			code: ctoharness.BlockSourceExternal,
			untouched: func(l layout) []string {
				return []string{filepath.Join(l.owned, "repo", "third_party")}
			},
		},
		{
			name: "file, not a directory",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "file.txt")
				writeFile(t, p, "x")
				return p
			},
			code: ctoharness.BlockSourceNotGit,
		},
		{
			name: "directory without .git",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "plain")
				writeFile(t, filepath.Join(p, "a.txt"), "x")
				return p
			},
			code: ctoharness.BlockSourceNotGit,
		},
		{
			name: ".git directory without HEAD",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "half")
				mkdir(t, filepath.Join(p, ".git", "objects"))
				return p
			},
			code: ctoharness.BlockSourceNotGit,
		},
		{
			name: "bare repository",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "bare.git")
				if _, err := git.PlainInit(p, true); err != nil {
					t.Fatal(err)
				}
				return p
			},
			code: ctoharness.BlockSourceBare,
		},
		{
			name: "core.bare = true in .git/config",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "repo")
				cfg := filepath.Join(p, ".git", "config")
				b, err := os.ReadFile(cfg)
				if err != nil {
					t.Fatal(err)
				}
				s := strings.Replace(string(b), "bare = false", "bare = true", 1)
				if s == string(b) {
					t.Fatalf("config has no bare = false line:\n%s", b)
				}
				writeFile(t, cfg, s)
				return p
			},
			code: ctoharness.BlockSourceBare,
		},
		{
			name: ".git is a gitfile naming another worktree's .git",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "sep")
				writeFile(t, filepath.Join(p, ".git"), "gitdir: "+filepath.Join(l.owned, "repo", ".git")+"\n")
				return p
			},
			code: ctoharness.BlockSourceLinkedWorktree,
		},
		{
			name: ".git is a file that names nothing",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "odd")
				writeFile(t, filepath.Join(p, ".git"), "not a gitfile\n")
				return p
			},
			code: ctoharness.BlockSourceNotGit,
		},
		{
			name: ".git is a file (linked worktree)",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "wt")
				writeFile(t, filepath.Join(p, ".git"), "gitdir: "+filepath.Join(l.owned, "repo", ".git", "worktrees", "wt")+"\n")
				return p
			},
			code: ctoharness.BlockSourceLinkedWorktree,
		},
		{
			name: ".git is a symlink",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "gitlink")
				mkdir(t, p)
				symlink(t, filepath.Join(l.owned, "repo", ".git"), filepath.Join(p, ".git"))
				return p
			},
			code: ctoharness.BlockSourceSymlink,
		},
		{
			name: "commondir",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "repo")
				writeFile(t, filepath.Join(p, ".git", "commondir"), "../../other/.git\n")
				return p
			},
			code: ctoharness.BlockSourceLinkedWorktree,
		},
		{
			name: "alternates",
			setup: func(t *testing.T, l layout) string {
				p := filepath.Join(l.owned, "repo")
				writeFile(t, filepath.Join(p, ".git", "objects", "info", "alternates"), filepath.Join(l.elsewhere, "repo", ".git", "objects")+"\n")
				return p
			},
			code: ctoharness.BlockSourceAlternates,
		},
		{
			name:  "not owned",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.elsewhere, "repo") },
			code:  ctoharness.BlockSourceNotOwned,
		},
		{
			name:  "no owned roots configured",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.owned, "repo") },
			pol:   func(l layout) Policy { return Policy{TargetRoots: []string{l.target}} },
			code:  ctoharness.BlockSourceNotOwned,
		},
		{
			name: "owned sibling with a common name prefix does not count",
			setup: func(t *testing.T, l layout) string {
				initRepo(t, filepath.Join(l.base, "owned-not", "repo"), map[string]string{"a": "a"})
				return filepath.Join(l.base, "owned-not", "repo")
			},
			code: ctoharness.BlockSourceNotOwned,
		},
		{
			name:  "owned entry inside the target root is ignored, not touched",
			setup: func(t *testing.T, l layout) string { return filepath.Join(l.elsewhere, "repo") },
			pol: func(l layout) Policy {
				return Policy{Owned: []string{l.target, filepath.Join(l.target, "repo")}, TargetRoots: []string{l.target}}
			},
			code: ctoharness.BlockSourceNotOwned,
		},
		{
			name: "owned entry that is a symlink into the target root is ignored",
			setup: func(t *testing.T, l layout) string {
				symlink(t, l.target, filepath.Join(l.base, "owned-via-link"))
				return filepath.Join(l.target, "..", "elsewhere", "repo")
			},
			pol: func(l layout) Policy {
				return Policy{Owned: []string{filepath.Join(l.base, "owned-via-link")}, TargetRoots: []string{l.target}}
			},
			code: ctoharness.BlockSourceNotOwned,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			path := tc.setup(t, l)
			pol := l.policy()
			if tc.pol != nil {
				pol = tc.pol(l)
			}
			rec := &recorder{}
			repo, err := Classify(context.Background(), path, pol, rec)
			if err == nil {
				t.Fatalf("Classify(%q) = %+v, want refusal %s", path, repo, tc.code)
			}
			b := blockerOf(t, err)
			if b.Code != tc.code {
				t.Fatalf("code = %s, want %s (message: %s)", b.Code, tc.code, b.Message)
			}
			if b.Step != ctoharness.StepClassify {
				t.Errorf("step = %s, want %s", b.Step, ctoharness.StepClassify)
			}
			if b.Message == "" {
				t.Error("empty blocker message")
			}
			fenced := append(append([]string{}, pol.TargetRoots...), pol.ExternalRoots...)
			fenced = append(fenced, l.target, l.external)
			if tc.untouched != nil {
				fenced = append(fenced, tc.untouched(l)...)
			}
			for _, root := range fenced {
				if got := rec.under(root); len(got) > 0 {
					t.Errorf("trace touched %s: %v", root, got)
				}
			}
			if tc.code == ctoharness.BlockSourceIsTarget || tc.code == ctoharness.BlockSourceExternal {
				// The lexical check runs before anything is touched when the
				// given path itself is inside a fenced root.
				if abs, err := filepath.Abs(path); err == nil && !strings.Contains(path, "://") {
					if _, ok := newFence(pol).check(abs); ok && len(rec.entries) != 0 {
						t.Errorf("lexical refusal still touched the filesystem: %v", rec.entries)
					}
				}
			}
		})
	}
}

func fixed(p string) func(*testing.T, layout) string {
	return func(*testing.T, layout) string { return p }
}

// TestClassifyTargetRefusalTouchesNothingInside checks, for a parent symlink
// into the target root, exactly what was touched: the symlink itself was
// stat'ed and read, and resolution stopped at the fence.
func TestClassifyTargetRefusalTouchesNothingInside(t *testing.T) {
	l := newLayout(t)
	link := filepath.Join(l.owned, "lnk")
	symlink(t, l.target, link)
	rec := &recorder{}
	_, err := Classify(context.Background(), filepath.Join(link, "repo"), l.policy(), rec)
	b := blockerOf(t, err)
	if b.Code != ctoharness.BlockSourceIsTarget {
		t.Fatalf("code = %s, want %s", b.Code, ctoharness.BlockSourceIsTarget)
	}
	if got := rec.under(l.target); len(got) != 0 {
		t.Fatalf("touched target root: %v", got)
	}
	var sawLink, sawReadlink bool
	for _, e := range rec.entries {
		if e.path == link && e.op == ctoharness.TraceStat {
			sawLink = true
		}
		if e.path == link && e.op == ctoharness.TraceReadlink {
			sawReadlink = true
		}
	}
	if !sawLink || !sawReadlink {
		t.Fatalf("expected stat and readlink of %s in trace, got %v", link, rec.entries)
	}
	if !strings.Contains(b.Message, l.target) {
		t.Errorf("message %q does not name the target root", b.Message)
	}
}

func TestClassifyAccepts(t *testing.T) {
	l := newLayout(t)
	repoDir := filepath.Join(l.owned, "repo")
	symlink(t, l.owned, filepath.Join(l.base, "owned-link"))
	symlink(t, "repo", filepath.Join(l.owned, "repo-link"))

	tests := []struct {
		name      string
		path      string
		pol       Policy
		wantGiven string
	}{
		{name: "real path", path: repoDir, pol: l.policy(), wantGiven: repoDir},
		{name: "trailing slash and dot segments", path: l.owned + "/./repo/", pol: l.policy(), wantGiven: repoDir},
		{
			name:      "through a symlinked parent",
			path:      filepath.Join(l.base, "owned-link", "repo"),
			pol:       l.policy(),
			wantGiven: filepath.Join(l.base, "owned-link", "repo"),
		},
		{
			name:      "given as a symlink, as git accepts one",
			path:      filepath.Join(l.owned, "repo-link"),
			pol:       l.policy(),
			wantGiven: filepath.Join(l.owned, "repo-link"),
		},
		{
			name:      "owned root given as a symlink",
			path:      repoDir,
			pol:       Policy{Owned: []string{filepath.Join(l.base, "owned-link")}, TargetRoots: []string{l.target}},
			wantGiven: repoDir,
		},
		{
			name:      "owned root is the repository itself",
			path:      repoDir,
			pol:       Policy{Owned: []string{repoDir}},
			wantGiven: repoDir,
		},
		{
			name:      "target root that only shares a name prefix",
			path:      repoDir,
			pol:       Policy{Owned: []string{l.owned}, TargetRoots: []string{filepath.Join(l.owned, "rep"), filepath.Join(l.owned, "repo2")}},
			wantGiven: repoDir,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			got, err := Classify(context.Background(), tc.path, tc.pol, rec)
			if err != nil {
				t.Fatalf("Classify(%q): %v", tc.path, err)
			}
			want := Repo{Given: tc.wantGiven, Root: repoDir, GitDir: repoDir + "/.git"}
			if got != want {
				t.Fatalf("Classify(%q) = %+v, want %+v", tc.path, got, want)
			}
			if got := rec.under(l.target); len(got) != 0 {
				t.Errorf("touched target root: %v", got)
			}
			for _, e := range rec.entries {
				switch e.op {
				case ctoharness.TraceStat, ctoharness.TraceReadlink, ctoharness.TraceRead:
				case ctoharness.TraceWalk:
					if e.path != repoDir+"/.git/refs" { // the look for ref locks
						t.Errorf("unexpected walk of %s", e.path)
					}
				default:
					t.Errorf("unexpected trace op %s on %s", e.op, e.path)
				}
			}
			// The layout checks must have been traced, .git/config read included.
			var readConfig bool
			for _, e := range rec.entries {
				if e.op == ctoharness.TraceRead && e.path == repoDir+"/.git/config" {
					readConfig = true
				}
			}
			if !readConfig {
				t.Errorf("trace lacks the read of .git/config: %v", rec.entries)
			}
		})
	}
}

func TestClassifyRelativePath(t *testing.T) {
	l := newLayout(t)
	t.Chdir(l.owned)
	got, err := Classify(context.Background(), "repo", l.policy(), ctoharness.NopTracer{})
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(l.owned, "repo")
	if got.Given != want || got.Root != want {
		t.Fatalf("got %+v, want Given and Root %s", got, want)
	}
}

func TestClassifyCanceled(t *testing.T) {
	l := newLayout(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	rec := &recorder{}
	if _, err := Classify(ctx, filepath.Join(l.owned, "repo"), l.policy(), rec); err == nil {
		t.Fatal("Classify with a canceled context succeeded")
	}
	if len(rec.entries) != 0 {
		t.Fatalf("canceled Classify touched %v", rec.entries)
	}
}

func TestWithin(t *testing.T) {
	tests := []struct {
		p, root string
		want    bool
	}{
		{"/a/b", "/a/b", true},
		{"/a/b/c", "/a/b", true},
		{"/a/bc", "/a/b", false},
		{"/a", "/a/b", false},
		{"/anything", "/", true},
		{"/a/b-c/d", "/a/b", false},
	}
	for _, tc := range tests {
		if got := within(tc.p, tc.root); got != tc.want {
			t.Errorf("within(%q, %q) = %v, want %v", tc.p, tc.root, got, tc.want)
		}
	}
}

func TestIsRemote(t *testing.T) {
	tests := map[string]bool{
		"https://github.com/o/r":  true,
		"ssh://host/r":            true,
		"git://host/r":            true,
		"file:///x":               true,
		"git@github.com:o/r.git":  true,
		"host:r":                  true,
		"/abs/path":               false,
		"rel/path":                false,
		"./dir:with-colon":        false,
		"/abs/dir:with-colon/sub": false,
	}
	for p, want := range tests {
		if got := isRemote(p); got != want {
			t.Errorf("isRemote(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestCoreBare(t *testing.T) {
	tests := []struct {
		name string
		cfg  string
		want bool
	}{
		{"empty", "", false},
		{"go-git default", "[core]\n\tbare = false\n", false},
		{"true", "[core]\n\tbare = true\n", true},
		{"case-insensitive section and key", "[CORE]\n\tBare = TRUE\n", true},
		{"yes", "[core]\nbare=yes\n", true},
		{"one", "[core]\nbare = 1 # comment\n", true},
		{"bare key without value means true", "[core]\n\tbare\n", true},
		{"other section", "[remote \"origin\"]\n\tbare = true\n", false},
		{"core subsection is not core", "[core \"x\"]\n\tbare = true\n", false},
		{"later value wins", "[core]\nbare = true\n[core]\nbare = false\n", false},
		{"commented out", "[core]\n# bare = true\n; bare = true\n", false},
		{"key on section line", "[core] bare = true\n", true},
	}
	for _, tc := range tests {
		if got := coreBare([]byte(tc.cfg)); got != tc.want {
			t.Errorf("%s: coreBare(%q) = %v, want %v", tc.name, tc.cfg, got, tc.want)
		}
	}
}

// TestClassifyAlternates: objects borrowed from another repository (git
// clone --shared) are accepted only from an owned, fenced-off-nothing,
// plain object directory.
func TestClassifyAlternates(t *testing.T) {
	tests := []struct {
		name string
		alt  func(l layout) string  // the alternates file's content
		code ctoharness.BlockerCode // "" accepts
	}{
		{name: "owned lender", alt: func(l layout) string {
			return "# shared\n" + filepath.Join(l.owned, "lender", ".git", "objects") + "\n"
		}},
		{name: "lender outside the owned roots", alt: func(l layout) string { return filepath.Join(l.elsewhere, "repo", ".git", "objects") + "\n" }, code: ctoharness.BlockSourceAlternates},
		{name: "lender in a target root", alt: func(l layout) string { return filepath.Join(l.target, "repo", ".git", "objects") + "\n" }, code: ctoharness.BlockSourceIsTarget},
		{name: "relative path", alt: func(l layout) string { return "../../../lender/.git/objects\n" }, code: ctoharness.BlockSourceAlternates},
		{name: "missing directory", alt: func(l layout) string { return filepath.Join(l.owned, "gone", "objects") + "\n" }, code: ctoharness.BlockSourceNotFound},
		{name: "chained", alt: func(l layout) string {
			chained := filepath.Join(l.owned, "lender", ".git", "objects")
			writeFile(t, filepath.Join(chained, "info", "alternates"), filepath.Join(l.owned, "repo", ".git", "objects")+"\n")
			return chained + "\n"
		}, code: ctoharness.BlockSourceAlternates},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			initRepo(t, filepath.Join(l.owned, "lender"), map[string]string{"x": "x\n"})
			borrower := filepath.Join(l.owned, "borrower")
			initRepo(t, borrower, map[string]string{"y": "y\n"})
			writeFile(t, filepath.Join(borrower, ".git", "objects", "info", "alternates"), tc.alt(l))
			rec := &recorder{}
			got, err := Classify(context.Background(), borrower, l.policy(), rec)
			if got := rec.under(l.target); len(got) != 0 {
				t.Errorf("touched the target root: %v", got)
			}
			if tc.code == "" {
				if err != nil {
					t.Fatalf("Classify: %v", err)
				}
				if got.Root != borrower {
					t.Fatalf("root %q, want %q", got.Root, borrower)
				}
				return
			}
			var be *ctoharness.BlockerError
			if !errors.As(err, &be) || be.Blocker.Code != tc.code {
				t.Fatalf("Classify: %v; want %s", err, tc.code)
			}
		})
	}
}

// separateLayout makes an owned worktree whose git directory was moved to
// gd with a gitfile naming it (git init --separate-git-dir), gitfile being
// the path the gitfile holds.
func separateLayout(t *testing.T, l layout, gd string, gitfile func(wt string) string) string {
	t.Helper()
	wt := filepath.Join(l.owned, "sep")
	initRepo(t, wt, map[string]string{"README.md": "hello\n"})
	if err := os.MkdirAll(filepath.Dir(gd), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(wt, ".git"), gd); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(wt, ".git"), "gitdir: "+gitfile(wt)+"\n")
	return wt
}

// TestClassifySeparateGitDir: a worktree whose git directory is kept
// elsewhere (--separate-git-dir), absolute or relative, outside the owned
// roots, is a source whose GitDir is that directory's real path.
func TestClassifySeparateGitDir(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gitfile func(l layout, wt, gd string) string
	}{
		{"absolute", func(_ layout, _, gd string) string { return gd }},
		{"relative", func(_ layout, wt, gd string) string { r, _ := filepath.Rel(wt, gd); return r }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			gd := filepath.Join(l.elsewhere, "store.git")
			wt := separateLayout(t, l, gd, func(wt string) string { return tc.gitfile(l, wt, gd) })
			rec := &recorder{}
			got, err := Classify(context.Background(), wt, l.policy(), rec)
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			if got.Root != wt || got.GitDir != gd || !got.Separate() {
				t.Fatalf("repo %+v, want root %s and git dir %s", got, wt, gd)
			}
			if p := got.HostPath(".git/objects/info"); p != gd+"/objects/info" {
				t.Errorf("HostPath(.git/objects/info) = %s", p)
			}
			if p := got.HostPath(".git"); p != wt+"/.git" {
				t.Errorf("HostPath(.git) = %s, want the gitfile", p)
			}
			if len(rec.under(gd)) == 0 {
				t.Errorf("the git directory %s was inspected without a trace entry", gd)
			}
		})
	}
}

// TestClassifySeparateGitDirRefusals: a gitfile whose git directory is
// shared with another checkout, lies inside the worktree, sits in a fenced
// root (refused untouched), is busy or is no directory is refused with
// the fix.
func TestClassifySeparateGitDirRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		gd    func(l layout) string
		after func(t *testing.T, gd string)
		code  ctoharness.BlockerCode
		want  string
	}{
		{name: "another worktree's .git", gd: func(l layout) string { return filepath.Join(l.elsewhere, "other", ".git") },
			code: ctoharness.BlockSourceLinkedWorktree, want: "shared"},
		{name: "inside the worktree", gd: func(l layout) string { return filepath.Join(l.owned, "sep", "meta") },
			code: ctoharness.BlockSourceNotGit, want: "inside the worktree"},
		{name: "in a Target root", gd: func(l layout) string { return filepath.Join(l.target, "store.git") },
			code: ctoharness.BlockSourceIsTarget},
		{name: "in an external root", gd: func(l layout) string { return filepath.Join(l.external, "store.git") },
			code: ctoharness.BlockSourceExternal},
		{name: "a commondir", gd: func(l layout) string { return filepath.Join(l.elsewhere, "store.git") },
			after: func(t *testing.T, gd string) { writeFile(t, filepath.Join(gd, "commondir"), "../x\n") },
			code:  ctoharness.BlockSourceLinkedWorktree},
		{name: "busy", gd: func(l layout) string { return filepath.Join(l.elsewhere, "store.git") },
			after: func(t *testing.T, gd string) { writeFile(t, filepath.Join(gd, "index.lock"), "") },
			code:  ctoharness.BlockSourceBusy, want: "index.lock"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			gd := tc.gd(l)
			var wt string
			if strings.HasPrefix(gd, filepath.Join(l.owned, "sep")+"/") {
				wt = separateLayout(t, l, filepath.Join(l.elsewhere, "tmp.git"), func(string) string { return gd })
				if err := os.Rename(filepath.Join(l.elsewhere, "tmp.git"), gd); err != nil {
					t.Fatal(err)
				}
			} else {
				wt = separateLayout(t, l, gd, func(string) string { return gd })
			}
			if tc.after != nil {
				tc.after(t, gd)
			}
			rec := &recorder{}
			_, err := Classify(context.Background(), wt, l.policy(), rec)
			var be *ctoharness.BlockerError
			if !errors.As(err, &be) || be.Blocker.Code != tc.code {
				t.Fatalf("Classify: %v; want %s", err, tc.code)
			}
			if !strings.Contains(be.Blocker.Message, tc.want) {
				t.Errorf("message %q lacks %q", be.Blocker.Message, tc.want)
			}
			for _, root := range []string{l.target, l.external} {
				if got := rec.under(root); len(got) != 0 {
					t.Errorf("touched the fenced root %s: %v", root, got)
				}
			}
		})
	}
}

// TestNotOwnedNamesTheFix checks that an ownership refusal says where the fix
// goes: the key owned_sources in the config file in use, with the line to
// paste; or, with no config file, the file to write and how to pass it.
func TestNotOwnedNamesTheFix(t *testing.T) {
	l := newLayout(t)
	repo := filepath.Join(l.elsewhere, "repo")
	pol := l.policy()
	pol.ConfigFile = "/home/me/harness.json"
	_, err := Classify(context.Background(), repo, pol, nil)
	b := blockerOf(t, err)
	want := `add ` + repo + ` to "owned_sources" in the config /home/me/harness.json, for example "owned_sources":["` + l.owned + `","` + repo + `"]`
	if b.Code != ctoharness.BlockSourceNotOwned || !strings.Contains(b.Message, want) {
		t.Errorf("blocker %s %q, want SOURCE_NOT_OWNED containing %q", b.Code, b.Message, want)
	}

	_, err = Classify(context.Background(), repo, Policy{TargetRoots: []string{l.target}}, nil)
	b = blockerOf(t, err)
	want = `no config file is in use: write one holding {"owned_sources":["` + repo + `"], "target_repository_roots": []} and pass it with --config FILE (or set CTO_HARNESS_CONFIG)`
	if b.Code != ctoharness.BlockSourceNotOwned || !strings.Contains(b.Message, want) {
		t.Errorf("blocker %s %q, want SOURCE_NOT_OWNED containing %q", b.Code, b.Message, want)
	}
}
