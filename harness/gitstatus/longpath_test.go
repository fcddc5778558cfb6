package gitstatus_test

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// deepDir is the relative path of a chain of directories with 200-byte
// names, 4000 bytes in all: with any worktree root in front it is close to
// PATH_MAX (4096), and a file in it takes the full path past it, while the
// path relative to the root, which git uses, stays below it.
var deepDir = strings.Repeat(strings.Repeat("d", 199)+"/", 20)

// short abbreviates deepDir in test output.
func short(s string) string { return strings.ReplaceAll(s, deepDir, "<deep>/") }

// openDeep opens the directory that holds rel (below root), making the
// directories on the way one at a time with the *at calls, since the
// absolute path is too long for any single system call.
func openDeep(t *testing.T, root, rel string) (int, string) {
	t.Helper()
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	parts := strings.Split(rel, "/")
	for _, name := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil && err != unix.EEXIST {
			t.Fatalf("mkdir %s: %v", name, err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		must(t, err)
		fd = next
	}
	return fd, parts[len(parts)-1]
}

// writeDeep writes content at rel below root.
func writeDeep(t *testing.T, root, rel, content string) {
	t.Helper()
	dir, name := openDeep(t, root, rel)
	defer unix.Close(dir)
	f, err := unix.Openat(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	must(t, err)
	defer unix.Close(f)
	_, err = unix.Write(f, []byte(content))
	must(t, err)
}

// symlinkDeep makes rel below root a symlink to target.
func symlinkDeep(t *testing.T, root, rel, target string) {
	t.Helper()
	dir, name := openDeep(t, root, rel)
	defer unix.Close(dir)
	must(t, unix.Symlinkat(target, dir, name))
}

// deepManifest is the manifest package source records for root (every
// entry lstat'ed, "." included, sorted bytewise by path), listed through
// directory descriptors so that no path past PATH_MAX is ever named.
func deepManifest(t *testing.T, root string) []ctoharness.ManifestEntry {
	t.Helper()
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	must(t, err)
	var out []ctoharness.ManifestEntry
	var walk func(dir int, rel string)
	add := func(dir int, name, rel string) *unix.Stat_t {
		var st unix.Stat_t
		must(t, unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW))
		e := ctoharness.ManifestEntry{
			Path: rel, Mode: uint32(modeOf(st.Mode)), Size: st.Size,
			MtimeNs: st.Mtim.Nano(), CtimeNs: st.Ctim.Nano(), Inode: st.Ino, Dev: st.Dev, UID: st.Uid, GID: st.Gid,
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			e.Type = ctoharness.EntryFile
		case unix.S_IFDIR:
			e.Type = ctoharness.EntryDir
		case unix.S_IFLNK:
			e.Type = ctoharness.EntrySymlink
			buf := make([]byte, 4096)
			n, err := unix.Readlinkat(dir, name, buf)
			must(t, err)
			e.SetTarget(string(buf[:n]))
		default:
			e.Type = ctoharness.EntryOther
		}
		out = append(out, e)
		return &st
	}
	walk = func(dir int, rel string) {
		defer unix.Close(dir)
		dup, err := unix.Dup(dir)
		must(t, err)
		f := os.NewFile(uintptr(dup), rel)
		names, err := f.Readdirnames(-1)
		f.Close()
		must(t, err)
		for _, name := range names {
			childRel := name
			if rel != "" {
				childRel = rel + "/" + name
			}
			if add(dir, name, childRel).Mode&unix.S_IFMT == unix.S_IFDIR {
				sub, err := unix.Openat(dir, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
				must(t, err)
				walk(sub, childRel)
			}
		}
	}
	add(unix.AT_FDCWD, root, ".")
	walk(fd, "")
	slices.SortFunc(out, func(a, b ctoharness.ManifestEntry) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// modeOf converts a raw st_mode to fs.FileMode as package os (and the
// manifest) does.
func modeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & unix.S_IFMT {
	case unix.S_IFBLK:
		mode |= fs.ModeDevice
	case unix.S_IFCHR:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case unix.S_IFDIR:
		mode |= fs.ModeDir
	case unix.S_IFIFO:
		mode |= fs.ModeNamedPipe
	case unix.S_IFLNK:
		mode |= fs.ModeSymlink
	case unix.S_IFSOCK:
		mode |= fs.ModeSocket
	}
	if m&unix.S_ISGID != 0 {
		mode |= fs.ModeSetgid
	}
	if m&unix.S_ISUID != 0 {
		mode |= fs.ModeSetuid
	}
	if m&unix.S_ISVTX != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}

// TestLongPathAgreesWithGit: tracked and untracked files, an ignore file,
// an attribute file and a symlink whose full paths exceed PATH_MAX are
// read and compared as git compares them, relative to the worktree root.
// package source's walk cannot list such a worktree (it lstats absolute
// paths), so the manifest here is listed through directory descriptors.
func TestLongPathAgreesWithGit(t *testing.T) {
	file := deepDir + strings.Repeat("f", 50) + ".txt"
	cases := []struct {
		name   string
		mutate func(t *testing.T, e gitEnv, dir string)
	}{
		{"clean", func(*testing.T, gitEnv, string) {}},
		{"deep file modified, same size", func(t *testing.T, e gitEnv, dir string) {
			writeDeep(t, dir, file, "HELLO\n")
		}},
		{"deep file modified", func(t *testing.T, e gitEnv, dir string) {
			writeDeep(t, dir, file, "hello, again\n")
		}},
		{"deep file with CRLF, normalized by its attributes", func(t *testing.T, e gitEnv, dir string) {
			writeDeep(t, dir, file, "hello\r\n")
		}},
		{"deep untracked and ignored files", func(t *testing.T, e gitEnv, dir string) {
			writeDeep(t, dir, deepDir+"new.txt", "new\n")
			writeDeep(t, dir, deepDir+"x.log", "log\n")
		}},
		{"deep file staged", func(t *testing.T, e gitEnv, dir string) {
			writeDeep(t, dir, file, "staged\n")
			e.run(t, dir, "add", "-A")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newGitEnv(t)
			dir := committedRepo(t, e, map[string]string{"a.txt": "alpha\n"})
			if n := len(dir) + 1 + len(file); n <= unix.PathMax {
				t.Fatalf("the full path is %d bytes, not past PATH_MAX", n)
			}
			writeDeep(t, dir, file, "hello\n")
			writeDeep(t, dir, deepDir+".gitignore", "*.log\n")
			writeDeep(t, dir, deepDir+".gitattributes", "*.txt text\n")
			symlinkDeep(t, dir, deepDir+"link", "../up")
			e.run(t, dir, "add", "-A")
			e.run(t, dir, "commit", "-q", "-m", "deep")
			tc.mutate(t, e, dir)
			route, err := e.routeStatusOf(t, dir, deepManifest(t, dir))
			git := e.gitStatusV2(t, dir)
			if err != nil {
				t.Fatalf("git says\n%s\nthe route failed: %s", short(strings.Join(git, "\n")), short(err.Error()))
			}
			if !slices.Equal(route, git) {
				t.Fatalf("route says\n%s\ngit says\n%s", short(strings.Join(route, "\n")), short(strings.Join(git, "\n")))
			}
		})
	}
}

// TestLongPathNestedRepository: a nested repository in a deep directory.
// Where its git directory's paths fit in PATH_MAX, git lists it as "dir/"
// and so must the route (which reads nested repositories by absolute
// path). Past PATH_MAX git 2.39 fails ("Invalid path": it makes the
// directory's path absolute), and the route must refuse the repository,
// saying why, rather than take the repository for a plain directory.
func TestLongPathNestedRepository(t *testing.T) {
	shallower := strings.TrimSuffix(deepDir, strings.Repeat("d", 199)+"/")
	for _, tc := range []struct {
		name, nested string
		past         bool
	}{
		{"git directory within PATH_MAX", shallower + "n", false},
		{"git directory past PATH_MAX", deepDir + strings.Repeat("n", 40), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGitEnv(t)
			dir := committedRepo(t, e, map[string]string{"a.txt": "alpha\n"})
			if n := len(dir) + len("/") + len(tc.nested) + len("/.git/commondir"); (n >= unix.PathMax) != tc.past {
				t.Fatalf("the git directory's paths are %d bytes long: the case is mislabelled", n)
			}
			writeDeep(t, dir, tc.nested+"/.git/HEAD", "ref: refs/heads/main\n")
			for _, sub := range []string{"objects", "refs"} {
				fd, _ := openDeep(t, dir, tc.nested+"/.git/"+sub+"/-")
				unix.Close(fd)
			}
			route, err := e.routeStatusOf(t, dir, deepManifest(t, dir))
			if !tc.past {
				git := e.gitStatusV2(t, dir)
				if want := []string{"?? " + tc.nested + "/"}; !slices.Equal(git, want) {
					t.Fatalf("git says\n%s\nexpected it to list the nested repository", short(strings.Join(git, "\n")))
				}
				if err != nil || !slices.Equal(route, git) {
					t.Fatalf("route says %q (%v), git %q", short(strings.Join(route, "\n")), err, short(strings.Join(git, "\n")))
				}
				return
			}
			_, gitErr := e.try(dir, append(slices.Clone(statusArgs), "--porcelain=v2")...)
			if gitErr == nil {
				t.Log("git now reads a nested repository past PATH_MAX; the route still refuses it")
			}
			var ue *gitstatus.UnsupportedError
			if !errors.As(err, &ue) || ue.Code != ctoharness.BlockSourceGitFeature || !strings.Contains(ue.Reason, "PATH_MAX") {
				t.Fatalf("the route should refuse the nested repository as too long a path for it, got %q, %v",
					short(strings.Join(route, "\n")), err)
			}
			t.Log(short(ue.Reason))
		})
	}
}
