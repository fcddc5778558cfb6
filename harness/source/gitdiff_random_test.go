package source

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

var (
	statusSeed  = flag.Uint64("status.seed", 0, "first seed of the randomized status test (0: from CTO_STATUS_SEED, else the fixed set)")
	statusSteps = flag.Int("status.steps", 40, "operations per repository in the randomized status test")
	statusRepos = flag.Int("status.repos", 0, "repositories in the randomized status test (0: from CTO_STATUS_REPOS, else 8)")
)

// fixedStatusSeed is the first seed of the set every `go test` runs, so
// that a plain run is reproducible; CTO_STATUS_SEED (or -status.seed)
// starts elsewhere, CTO_STATUS_SEED=random at a seed from the clock, and
// CTO_STATUS_REPOS (or -status.repos) runs more repositories.
const fixedStatusSeed = 21_10_000

// randomPaths are the paths random operations work on: files at several
// depths, some matching the ignore rules below, one directory that can
// also become a file.
var randomPaths = []string{"a", "b.txt", "c.log", "keep.log", "d1/e", "d1/f.txt", "d1/x.log", "d1/d2/g.txt", "d1/d2/h", "ign/i", "ign/keep.txt", "[x]", "sp ace"}

// randomRules are ignore lines random operations put into ignore files.
var randomRules = []string{"*.log", "!keep.log", "d1/", "/a", "*.txt", "d1/**/g.txt", "[!a-c]*", "ign/", "!ign/keep.txt", "d2", "\\[x]", "h", "*", "!*.txt", "sp\\ ace", "d1/d2/"}

// randomAttrs are attribute lines random operations put into attribute files.
var randomAttrs = []string{"*.txt text", "*.txt eol=crlf", "* text=auto", "*.log -text", "a ident", "* -text", "e crlf", "[attr]t text eol=crlf", "*.txt t", "h binary",
	`"sp ace" text eol=crlf`, `"[x]" -text`, `"d1/e"text`, "*.log eol=lf", "* text=auto eol=crlf"}

// TestStatusRandomAgreesWithGit applies random operation sequences to
// repositories and compares the route's status with git's after every
// step. A failure prints the seed; -status.seed (or CTO_STATUS_SEED)
// replays it, -status.steps and -status.repos make the run longer.
func TestStatusRandomAgreesWithGit(t *testing.T) {
	seed := *statusSeed
	if seed == 0 {
		switch s := os.Getenv("CTO_STATUS_SEED"); s {
		case "":
			seed = fixedStatusSeed
		case "random":
			seed = uint64(time.Now().UnixNano())
		default:
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				t.Fatalf("CTO_STATUS_SEED=%q: want a number or random: %v", s, err)
			}
			seed = v
		}
	}
	repos := *statusRepos
	if repos == 0 {
		repos = 8
		if s := os.Getenv("CTO_STATUS_REPOS"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v < 1 {
				t.Fatalf("CTO_STATUS_REPOS=%q: want a positive number", s)
			}
			repos = v
		}
	}
	steps := *statusSteps
	if testing.Short() {
		steps = min(steps, 10)
	}
	t.Logf("seeds %d to %d, %d steps each", seed, seed+uint64(repos)-1, steps)
	for n := range repos {
		s := seed + uint64(n)
		t.Run(fmt.Sprintf("seed=%d", s), func(t *testing.T) {
			t.Parallel()
			randomRun(t, s, steps)
		})
	}
}

func randomRun(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	e := newGitEnv(t)
	d := filepath.Join(realTempDir(t), "repo")
	e.run(t, "", "init", "-q", "-b", "main", d)
	writeAt(t, d, "a", "a0\n")
	writeAt(t, d, "d1/e", "e0\n")
	commitAll(t, e, d, "base")
	var log []string
	if seed%3 == 0 {
		// A third of the repositories keep their git directory outside
		// the worktree (git init --separate-git-dir). Decided by the seed,
		// not the generator, so the other draws stay as they were.
		separate(t, e, d, false)
		log = append(log, "separate git directory")
	}
	paths := randomPaths
	if rng.IntN(2) == 0 {
		// Half the repositories have a submodule to work inside.
		sub := subRepo(t, e, d, "subsrc")
		e.run(t, d, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "sm")
		e.run(t, d, "commit", "-q", "-m", "submodule")
		paths = append(slices.Clip(paths), "sm/s.txt", "sm/deep/t.txt", "sm/new")
		log = append(log, "submodule sm")
	}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	content := func() string {
		return pick([]string{"x\n", "y\n", "longer content\n", "", "a\r\nb\r\n", "X\n", "$Id$\r\n", "lone\rcr\n"})
	}
	for step := range steps {
		p := pick(paths)
		full := filepath.Join(d, filepath.FromSlash(p))
		var op string
		switch rng.IntN(30) {
		case 0, 1:
			op = "write " + p
			_ = os.MkdirAll(filepath.Dir(full), 0o755)
			_ = os.WriteFile(full, []byte(content()), 0o644)
		case 2:
			op = "same-size rewrite with restored mtime " + p
			if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
				b, _ := os.ReadFile(full)
				b[0] ^= 0x20
				_ = os.WriteFile(full, b, fi.Mode().Perm())
				_ = os.Chtimes(full, fi.ModTime(), fi.ModTime())
			}
		case 3:
			op = "delete " + p
			_ = os.RemoveAll(full)
		case 4:
			op = "chmod " + p
			if fi, err := os.Lstat(full); err == nil && fi.Mode().IsRegular() {
				_ = os.Chmod(full, fi.Mode().Perm()^0o100)
			}
		case 5:
			q := pick(paths)
			op = "rename " + p + " -> " + q
			_ = os.MkdirAll(filepath.Dir(filepath.Join(d, q)), 0o755)
			_ = os.Rename(full, filepath.Join(d, filepath.FromSlash(q)))
		case 6:
			target := pick([]string{"a", "d1", "nowhere", "../a"})
			op = "symlink " + p + " -> " + target
			_ = os.RemoveAll(full)
			_ = os.MkdirAll(filepath.Dir(full), 0o755)
			_ = os.Symlink(target, full)
		case 7:
			op = "mkdir " + p
			_ = os.MkdirAll(full, 0o755)
		case 8:
			file := pick([]string{".gitignore", "d1/.gitignore", "d1/d2/.gitignore", "ign/.gitignore", ".git/info/exclude"})
			var lines []string
			for range rng.IntN(4) {
				lines = append(lines, pick(randomRules))
			}
			op = fmt.Sprintf("ignore rules %s: %q", file, lines)
			_ = os.MkdirAll(filepath.Dir(filepath.Join(d, file)), 0o755)
			_ = os.WriteFile(filepath.Join(d, file), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		case 9:
			op = "git add " + p
			_, _ = e.try(d, "add", "--", p)
		case 10:
			op = "git commit -a"
			_, _ = e.try(d, "add", "-A")
			_, _ = e.try(d, "commit", "-q", "-m", fmt.Sprint("step ", step))
			if rng.IntN(2) == 0 {
				op += " (and inside sm)"
				_, _ = e.try(filepath.Join(d, "sm"), "commit", "-q", "-a", "-m", fmt.Sprint("sub step ", step))
			}
		case 11:
			op = "git add -u (stage)"
			_, _ = e.try(d, "add", "-u")
		case 12:
			op = "touch " + p
			future := time.Now().Add(time.Duration(rng.IntN(3)) * time.Hour)
			_ = os.Chtimes(full, future, future)
		case 13:
			op = "git rm --cached " + p
			_, _ = e.try(d, "rm", "-q", "-r", "--cached", "--", p)
		case 14:
			op = "git add -N " + p
			_, _ = e.try(d, "add", "-N", "--", p)
		case 15:
			flag := pick([]string{"--split-index", "--no-split-index"})
			op = "git update-index " + flag
			_, _ = e.try(d, "update-index", flag)
		case 16:
			v := pick([]string{"2", "3", "4"})
			op = "index version " + v
			_, _ = e.try(d, "update-index", "--index-version", v)
		case 17:
			v := pick([]string{"true", "false", "input"})
			op = "core.autocrlf " + v
			_, _ = e.try(d, "config", "core.autocrlf", v)
		case 18:
			file := pick([]string{".gitattributes", "d1/.gitattributes"})
			var lines []string
			for range rng.IntN(3) {
				lines = append(lines, pick(randomAttrs))
			}
			op = fmt.Sprintf("attributes %s: %q", file, lines)
			_ = os.MkdirAll(filepath.Dir(filepath.Join(d, file)), 0o755)
			_ = os.WriteFile(filepath.Join(d, file), []byte(strings.Join(lines, "\n")+"\n"), 0o644)
		case 19:
			dir := pick([]string{"nest", "d1/d2", "ign", "d1/nest"})
			op = "git init " + dir
			_, _ = e.try(d, "init", "-q", dir)
		case 20:
			choices := [][]string{{"set", "d1"}, {"set", "d1/d2", "ign"}, {"disable"}}
			args := choices[rng.IntN(len(choices))]
			op = "git sparse-checkout " + strings.Join(args, " ")
			_, _ = e.try(d, append([]string{"sparse-checkout"}, args...)...)
		case 21:
			op = "git checkout -- " + p
			_, _ = e.try(d, "checkout", "-q", "--", p)
		case 22:
			op = "git reset (unstage)"
			_, _ = e.try(d, "reset", "-q")
		case 23:
			flag := pick([]string{"--skip-worktree", "--no-skip-worktree", "--assume-unchanged", "--no-assume-unchanged"})
			op = "git update-index " + flag + " " + p
			_, _ = e.try(d, "update-index", flag, "--", p)
			if strings.Contains(flag, "assume") {
				// git hides an assume-unchanged file's change on purpose
				// and the route does not: only the flag's removal is kept.
				_, _ = e.try(d, "update-index", "--no-assume-unchanged", "--", p)
			}
		case 24:
			kvs := [][2]string{{"core.trustctime", "false"}, {"core.trustctime", "true"}, {"core.fileMode", "false"},
				{"core.fileMode", "true"}, {"core.fsmonitor", "true"}, {"core.fsmonitor", "false"}, {"core.symlinks", "true"},
				{"core.eol", "crlf"}, {"core.eol", "lf"}, {"core.checkStat", "minimal"}, {"core.checkStat", "default"}}
			kv := kvs[rng.IntN(len(kvs))]
			if kv[0] == "core.fsmonitor" && runtime.GOOS != "linux" {
				kv[1] = "false"
			}
			op = "git config " + kv[0] + " " + kv[1]
			_, _ = e.try(d, "config", kv[0], kv[1])
		case 25:
			dir := pick([]string{"wt", "d1/wt"})
			op = "git worktree add " + dir
			_, _ = e.try(d, "worktree", "add", "-q", "--detach", dir)
		case 26:
			// Configuration from the environment, as `git -c` passes it.
			ex := filepath.Join(e["HOME"], "env.ignore")
			_ = os.WriteFile(ex, []byte(pick(randomRules)+"\n"), 0o644)
			v := pick([]string{"", "'core.autocrlf'='true'", "'core.autocrlf=input'", "'core.filemode'='false'", "'core.excludesfile'='" + ex + "'"})
			op = "GIT_CONFIG_PARAMETERS=" + v
			e["GIT_CONFIG_PARAMETERS"] = v
		case 28:
			op = "replace " + p + " by a nested repository"
			_ = os.RemoveAll(full)
			_, _ = e.try(d, "init", "-q", p)
			_ = os.WriteFile(filepath.Join(full, "inner"), []byte("i\n"), 0o644)
		case 29:
			op = "merge conflict on " + p
			_, _ = e.try(d, "merge", "--abort")
			_, _ = e.try(d, "add", "-A")
			_, _ = e.try(d, "commit", "-q", "-m", "before merge")
			_, _ = e.try(d, "checkout", "-q", "-B", "side")
			_ = os.RemoveAll(full)
			_ = os.MkdirAll(filepath.Dir(full), 0o755)
			_ = os.WriteFile(full, []byte("theirs\n"), 0o644)
			_, _ = e.try(d, "add", "-A")
			_, _ = e.try(d, "commit", "-q", "-m", "side")
			_, _ = e.try(d, "checkout", "-q", "main")
			_ = os.RemoveAll(full)
			_ = os.MkdirAll(filepath.Dir(full), 0o755)
			_ = os.WriteFile(full, []byte("ours\n"), 0o644)
			_, _ = e.try(d, "add", "-A")
			_, _ = e.try(d, "commit", "-q", "-m", "ours")
			_, _ = e.try(d, "merge", "-q", "side")
		case 27:
			op = "git stash"
			_, _ = e.try(d, "stash", "-q")
			if rng.IntN(2) == 0 {
				op += " and pop"
				_, _ = e.try(d, "stash", "pop", "-q")
			}
		}
		log = append(log, op)
		got, _, err := routeStatusLines(t, e, d)
		gitOut, gitErr := e.try(d, "--no-optional-locks", "status", "--porcelain=v2", "-z")
		switch {
		case gitErr != nil && err != nil:
			// git cannot compute a status either: the route's refusal is
			// agreement, and the state stays broken for the steps after.
			var be *ctoharness.BlockerError
			if !errors.As(err, &be) {
				t.Fatalf("seed %d step %d (%s): git fails and the route fails without a blocker: %v", seed, step, op, err)
			}
			t.Logf("seed %d step %d (%s): git fails (%v) and the route refuses (%s); sequence ends", seed, step, op, strings.TrimSpace(gitOut+gitErr.Error()), be.Blocker.Code)
			return
		case gitErr != nil:
			t.Fatalf("seed %d step %d: git cannot compute a status (%v) but the route did (%q): it must refuse\nsteps:\n  %s", seed, step, gitErr, got, strings.Join(log, "\n  "))
		case err != nil:
			t.Fatalf("seed %d step %d (%s): route: %v\nsteps:\n  %s", seed, step, op, err, strings.Join(log, "\n  "))
		}
		want := revealHidden(t, e, d, got, e.gitStatus(t, d, "-c", "status.showUntrackedFiles=all"))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("seed %d step %d: status differs from git (replay with -status.seed=%d)\nsteps:\n  %s\nroute:\n  %s\ngit:\n  %s",
				seed, step, seed, strings.Join(log, "\n  "), strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
	}
}

// revealHidden accounts for git's one blind spot the sequences can reach:
// git built without nanosecond timestamps compares ctime and mtime by the
// second, so a same-size rewrite with a restored mtime in the second of
// the last index write, of a file not written in that second, looks
// unchanged to it. Where the route says a file is modified and git does
// not, the content decides: the route is right when git hash-object (with
// the same conversions) differs from the index's blob.
func revealHidden(t *testing.T, e gitEnv, d string, got, want []string) []string {
	byPath := map[string]string{}
	for _, l := range want {
		if !strings.HasPrefix(l, "??") && !strings.HasPrefix(l, "!!") {
			byPath[l[3:]] = l
		}
	}
	out := slices.Clone(want)
	for _, l := range got {
		if l[1] != 'M' || slices.Contains(want, l) {
			continue
		}
		p := l[3:]
		prev, listed := byPath[p]
		if listed && prev[:1]+"M"+prev[2:] != l {
			continue
		}
		if fi, err := os.Lstat(filepath.Join(d, p)); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		wt, err1 := e.try(d, "hash-object", "--", p)
		idx, err2 := e.try(d, "rev-parse", ":"+p)
		if err1 != nil || err2 != nil || strings.TrimSpace(wt) == strings.TrimSpace(idx) {
			continue
		}
		if listed {
			out = slices.DeleteFunc(out, func(x string) bool { return x == prev })
		}
		out = append(out, l)
	}
	sortLines(out)
	return out
}
