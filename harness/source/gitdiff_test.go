package source

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
)

// gitEnv is the environment of one differential scenario: the same for the
// git CLI and for the status route, with a home of its own and no system
// configuration.
type gitEnv map[string]string

func newGitEnv(t testing.TB) gitEnv {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git CLI not installed; the differential status tests need it")
	}
	home := realTempDir(t)
	return gitEnv{
		"HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C", "TZ": "UTC",
		"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@invalid", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@invalid",
		"GIT_ALLOW_PROTOCOL": "file", "PATH": os.Getenv("PATH"),
	}
}

func (e gitEnv) get(k string) string { return e[k] }

func (e gitEnv) environ() []string {
	out := make([]string, 0, len(e))
	for k, v := range e {
		out = append(out, k+"="+v)
	}
	return out
}

// run runs git in dir and returns its standard output.
func (e gitEnv) run(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := e.try(dir, args...)
	if err != nil {
		t.Fatalf("git %s (in %s): %v", strings.Join(args, " "), dir, err)
	}
	return out
}

func (e gitEnv) try(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = e.environ()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), errors.New(err.Error() + "\n" + out.String() + errb.String())
	}
	return out.String(), nil
}

// gitStatus is what git says: `git status --porcelain=v2 -z --ignored`
// with every untracked file listed and rename detection off, as
// "XY path" lines ("." spelled " "), sorted by path. It never writes the
// index (--no-optional-locks) so that it sees what the route saw.
func (e gitEnv) gitStatus(t testing.TB, dir string, extra ...string) []string {
	t.Helper()
	args := append([]string{"--no-optional-locks"}, extra...)
	args = append(args, "status", "--porcelain=v2", "-z", "--ignored", "--untracked-files=all", "--no-renames")
	raw := e.run(t, dir, args...)
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

// sortLines orders "XY path" lines by path, then code (a path can be both
// staged for deletion and present untracked).
func sortLines(ls []string) {
	slices.SortFunc(ls, func(a, b string) int {
		if c := strings.Compare(a[3:], b[3:]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
}

// routeStatus is what the harness's own status route says, in the same
// form, and which route computed it.
func routeStatusLines(t testing.TB, e gitEnv, dir string) ([]string, ctoharness.StatusRoute, error) {
	t.Helper()
	res, err := routeStatus(context.Background(), mustClassify(t, dir), e.get, true)
	if err != nil {
		return nil, "", err
	}
	out := make([]string, 0, len(res.Entries))
	for _, s := range res.Entries {
		out = append(out, s.Staging+s.Worktree+" "+s.Path)
	}
	sortLines(out)
	return out, res.Route, nil
}

func mustClassify(t testing.TB, dir string) Repo {
	t.Helper()
	repo, err := Classify(context.Background(), dir, Policy{Owned: []string{filepath.Dir(dir)}}, nil)
	if err != nil {
		t.Fatalf("classify %s: %v", dir, err)
	}
	return repo
}

// writeAt writes content at rel under dir, making parent directories.
func writeAt(t testing.TB, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// baseFiles is the committed content every scenario starts from.
var baseFiles = map[string]string{
	"a.txt": "alpha\n", "b.txt": "bravo\n", "dir/c.txt": "charlie\n", "dir/sub/d.txt": "delta\n",
	"exec.sh": "#!/bin/sh\necho hi\n", ".gitignore": "*.log\nbuild/\n", "Readme": "read me\n",
	"big.bin": strings.Repeat("0123456789abcdef", 1<<14),
}

// baseRepo makes a committed repository at dir/repo from baseFiles, an
// executable script and a symlink, and returns its path.
func baseRepo(t testing.TB, e gitEnv, initArgs ...string) string {
	t.Helper()
	dir := filepath.Join(realTempDir(t), "repo")
	e.run(t, "", append([]string{"init", "-q", "-b", "main"}, append(initArgs, dir)...)...)
	for p, c := range baseFiles {
		writeAt(t, dir, p, c)
	}
	mustDo(t, os.Chmod(filepath.Join(dir, "exec.sh"), 0o755))
	mustDo(t, os.Symlink("a.txt", filepath.Join(dir, "link")))
	e.run(t, dir, "add", "-A")
	e.run(t, dir, "commit", "-q", "-m", "base")
	return dir
}
