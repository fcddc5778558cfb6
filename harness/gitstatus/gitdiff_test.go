package gitstatus_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/source"
)

// gitEnv is the environment of one differential scenario, the same for
// the git CLI and for the status route: a home of its own, no system or
// global configuration.
type gitEnv map[string]string

func newGitEnv(t *testing.T) gitEnv {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed; the differential status tests need it")
	}
	return gitEnv{
		"HOME": t.TempDir(), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "LC_ALL": "C",
		"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@invalid",
		"PATH": os.Getenv("PATH"),
	}
}

func (e gitEnv) get(k string) string { return e[k] }

// try runs git in dir and returns its standard output; the error carries
// what git printed.
func (e gitEnv) try(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	for k, v := range e {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New("git " + strings.Join(args, " ") + ": " + err.Error() + "\n" + out.String() + errb.String())
	}
	return out.String(), nil
}

func (e gitEnv) run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := e.try(dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// statusArgs is the status the route computes: every untracked file,
// ignored ones too, no rename detection, and no index refresh (so that
// git sees the index the route read).
var statusArgs = []string{"--no-optional-locks", "status", "-z", "--ignored", "--untracked-files=all", "--no-renames"}

// gitStatusV2 is what `git status --porcelain=v2` says, as sorted
// "XY path" lines with "." spelled " ".
func (e gitEnv) gitStatusV2(t *testing.T, dir string) []string {
	t.Helper()
	raw := e.run(t, dir, append(slices.Clone(statusArgs), "--porcelain=v2")...)
	var out []string
	for _, rec := range strings.Split(raw, "\x00") {
		if rec == "" {
			continue
		}
		switch rec[0] {
		case '?', '!':
			out = append(out, rec[:1]+rec[:1]+" "+rec[2:])
		case '1':
			f := strings.SplitN(rec, " ", 9)
			out = append(out, strings.ReplaceAll(f[1], ".", " ")+" "+f[8])
		case 'u':
			f := strings.SplitN(rec, " ", 11)
			out = append(out, f[1]+" "+f[10])
		default:
			t.Fatalf("unexpected porcelain v2 record %q", rec)
		}
	}
	sortLines(out)
	return out
}

// gitStatusV1 is what `git status --porcelain` (v1) says, in the same
// form.
func (e gitEnv) gitStatusV1(t *testing.T, dir string) []string {
	t.Helper()
	raw := e.run(t, dir, append(slices.Clone(statusArgs), "--porcelain")...)
	var out []string
	for _, rec := range strings.Split(raw, "\x00") {
		if rec != "" {
			out = append(out, rec)
		}
	}
	sortLines(out)
	return out
}

// sortLines orders "XY path" lines by path, then code.
func sortLines(ls []string) {
	slices.SortFunc(ls, func(a, b string) int {
		if c := strings.Compare(a[3:], b[3:]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// routeStatus is what the status route says about the repository at
// root, in the same form, read as package source reads it for a proof:
// configuration, HEAD's tree, the manifest, then Compute.
func (e gitEnv) routeStatus(t *testing.T, root string) ([]string, error) {
	t.Helper()
	manifest, err := source.Manifest(context.Background(), root)
	if err != nil {
		return nil, err
	}
	return e.routeStatusOf(t, root, manifest)
}

// routeStatusOf is routeStatus from a manifest the caller listed.
func (e gitEnv) routeStatusOf(t *testing.T, root string, manifest []ctoharness.ManifestEntry) ([]string, error) {
	t.Helper()
	gitDir := gitstatus.GitDirOf(root)
	cfg, err := gitstatus.LoadConfig(gitDir, gitstatus.HeadBranch(gitDir), e.get)
	if err != nil {
		return nil, err
	}
	r, err := gitstatus.Open(root, gitDir)
	if err != nil {
		return nil, err
	}
	_, head, err := gitstatus.ResolveHead(gitDir)
	if err != nil {
		return nil, err
	}
	commit, err := r.CommitObject(head)
	if err != nil {
		return nil, err
	}
	st, err := gitstatus.Compute(&gitstatus.Input{
		Root: root, GitDir: gitDir, Manifest: manifest, Repo: r, HeadTree: commit.TreeHash,
		Config: cfg, Env: e.get, Ignored: true,
	})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(st))
	for _, s := range st {
		out = append(out, s.Staging+s.Worktree+" "+s.Path)
	}
	sortLines(out)
	return out, nil
}

// committedRepo makes a repository at a new directory with the given
// files committed on main, and returns its path.
func committedRepo(t *testing.T, e gitEnv, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	e.run(t, "", "init", "-q", "-b", "main", dir)
	for p, c := range files {
		write(t, dir, p, c, 0o644)
	}
	e.run(t, dir, "add", "-A")
	e.run(t, dir, "commit", "-q", "-m", "base")
	return dir
}

// agree fails the test unless the route's status equals git's.
func agree(t *testing.T, route []string, err error, git []string) {
	t.Helper()
	if err != nil {
		t.Fatalf("git says\n%s\nthe route failed: %v", strings.Join(git, "\n"), err)
	}
	if !slices.Equal(route, git) {
		t.Fatalf("route says\n%s\ngit says\n%s", strings.Join(route, "\n"), strings.Join(git, "\n"))
	}
}
