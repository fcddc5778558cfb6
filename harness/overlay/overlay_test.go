package overlay_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/overlay"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@invalid", "-c", "commit.gpgsign=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func write(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// snapshot is every path under root with its kind, mode, size, mtime,
// ctime and content hash: any write to root changes it.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		sum := ""
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h := sha256.Sum256(data)
			sum = hex.EncodeToString(h[:])
		}
		rel, _ := filepath.Rel(root, p)
		lines = append(lines, fmt.Sprintf("%s %o %d %d.%d %d.%d %s", rel, st.Mode, st.Size, st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec, sum))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

func listing(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestTreeShowsTheTreeAndNeverWritesTheSource mounts a source with
// untracked, ignored and .git content, checks the mount shows exactly the
// tracked tree, writes, deletes and renames through it, and checks the
// source did not change at all and that the mount table names no host path
// of the source or the layers.
func TestTreeShowsTheTreeAndNeverWritesTheSource(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "source-repository")
	write(t, filepath.Join(src, "README.md"), "hello\n")
	write(t, filepath.Join(src, "pkg", "a.go"), "package pkg\n")
	write(t, filepath.Join(src, ".gitignore"), "build/\n*.secret\n")
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "add", "-A")
	git(t, src, "commit", "-q", "-m", "one")
	write(t, filepath.Join(src, "build", "out.bin"), "ignored build output\n")
	write(t, filepath.Join(src, "pkg", "key.secret"), "an ignored secret\n")
	write(t, filepath.Join(src, "notes.txt"), "an untracked note\n")
	before := snapshot(t, src)

	work := filepath.Join(base, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	dest := filepath.Join(base, "shown")
	m, err := overlay.Tree(context.Background(), overlay.Input{Source: src, Dest: dest,
		Upper: filepath.Join(work, "layer"), Work: filepath.Join(work, "layer-work"), Tracer: ctoharness.NopTracer{}})
	if errors.Is(err, overlay.ErrUnavailable) {
		t.Skipf("overlayfs cannot be mounted here (needs CAP_SYS_ADMIN and overlayfs): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmount()

	if got, want := strings.Join(listing(t, dest), " "), ".gitignore README.md pkg pkg/a.go"; got != want {
		t.Fatalf("the mount shows %q, want only the tracked tree %q", got, want)
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(info), "\n") {
		if strings.Contains(line, " "+dest+" ") {
			for _, hidden := range []string{src, work} {
				if strings.Contains(line, hidden) {
					t.Fatalf("the mount table names %s: %s", hidden, line)
				}
			}
			// The layer is thrown away with the workspace: no unmount or
			// fsync inside may sync the host filesystem it is on.
			if !strings.Contains(line, "volatile") && kernelAtLeast(5, 10) { // ",volatile", or "fsync=volatile" from 6.x
				t.Errorf("the overlay is not volatile: %s", line)
			}
		}
	}

	// Write through the mount every way a process can.
	write(t, filepath.Join(dest, "README.md"), "changed\n")
	write(t, filepath.Join(dest, "new.txt"), "new\n")
	if err := os.Remove(filepath.Join(dest, "pkg", "a.go")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dest, ".gitignore"), filepath.Join(dest, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dest, "pkg"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dest, "notes.txt"), []byte("over the whiteout\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, src); after != before {
		t.Fatalf("the source changed through the overlay:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if data, _ := os.ReadFile(filepath.Join(src, "notes.txt")); string(data) != "an untracked note\n" {
		t.Fatalf("the source's untracked note now reads %q", data)
	}

	if err := m.Unmount(); err != nil {
		t.Fatal(err)
	}
	if err := m.Unmount(); err != nil {
		t.Fatalf("a second Unmount: %v", err)
	}
	if left := listing(t, dest); len(left) != 0 {
		t.Fatalf("the mount point still shows %v after Unmount", left)
	}
}

// TestTreeRefusesSubmodules: a submodule's files are written at its
// recorded commit, which the worktree need not show, so there is no
// overlay, and nothing is left behind.
func TestTreeRefusesSubmodules(t *testing.T) {
	base := t.TempDir()
	sub := filepath.Join(base, "sub")
	write(t, filepath.Join(sub, "s.txt"), "sub\n")
	git(t, sub, "init", "-q", "-b", "main")
	git(t, sub, "add", "-A")
	git(t, sub, "commit", "-q", "-m", "sub")
	src := filepath.Join(base, "src")
	write(t, filepath.Join(src, "a.txt"), "a\n")
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "-c", "protocol.file.allow=always", "submodule", "add", "-q", sub, "vendor/sub")
	git(t, src, "commit", "-q", "-am", "with a submodule")
	dest := filepath.Join(base, "shown")
	_, err := overlay.Tree(context.Background(), overlay.Input{Source: src, Dest: dest,
		Upper: filepath.Join(base, "layer"), Work: filepath.Join(base, "layer-work"), Tracer: ctoharness.NopTracer{}})
	if !errors.Is(err, overlay.ErrUnavailable) || !strings.Contains(err.Error(), "submodule") {
		t.Fatalf("err = %v, want ErrUnavailable naming the submodule", err)
	}
	for _, p := range []string{dest, filepath.Join(base, "layer"), filepath.Join(base, "layer-work")} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was left behind (%v)", p, err)
		}
	}
}

// TestDiscardLeavesNothing: giving an overlay up (the tree needs a copy)
// detaches it and removes the mount point and both layers, so a copy can be
// written at the same place.
func TestDiscardLeavesNothing(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	write(t, filepath.Join(src, "a.txt"), "a\n")
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "add", "-A")
	git(t, src, "commit", "-q", "-m", "one")
	write(t, filepath.Join(src, "untracked.txt"), "hidden by a whiteout\n")
	in := overlay.Input{Source: src, Dest: filepath.Join(base, "shown"), Upper: filepath.Join(base, "layer"), Work: filepath.Join(base, "layer-work"), Tracer: ctoharness.NopTracer{}}
	m, err := overlay.Tree(context.Background(), in)
	if errors.Is(err, overlay.ErrUnavailable) {
		t.Skipf("overlayfs cannot be mounted here (needs CAP_SYS_ADMIN and overlayfs): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Discard(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{in.Dest, in.Upper, in.Work} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s was left behind (%v)", p, err)
		}
	}
	if data, err := os.ReadFile(filepath.Join(src, "a.txt")); err != nil || string(data) != "a\n" {
		t.Fatalf("the source's a.txt reads %q, %v", data, err)
	}
}

// kernelAtLeast reports whether the running kernel is major.minor or later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var ma, mi int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}

// TestTreeLayerHoldsOnlyWhiteoutsAndOpaqueMarks: the mount asks for no
// redirects, no metacopy and no index, so that the upper layer alone says
// what changed. A renamed directory is copied (no redirect xattr), a chmod
// copies the whole file up (no metacopy xattr), and a directory removed
// and made again is opaque.
func TestTreeLayerHoldsOnlyWhiteoutsAndOpaqueMarks(t *testing.T) {
	base := t.TempDir()
	src := filepath.Join(base, "src")
	write(t, filepath.Join(src, "dir", "a.txt"), "a\n")
	write(t, filepath.Join(src, "again", "b.txt"), "b\n")
	write(t, filepath.Join(src, "mode.sh"), "echo\n")
	git(t, src, "init", "-q", "-b", "main")
	git(t, src, "add", "-A")
	git(t, src, "commit", "-q", "-m", "one")
	dest := filepath.Join(base, "shown")
	m, err := overlay.Tree(context.Background(), overlay.Input{Source: src, Dest: dest,
		Upper: filepath.Join(base, "layer"), Work: filepath.Join(base, "layer-work"), Tracer: ctoharness.NopTracer{}})
	if errors.Is(err, overlay.ErrUnavailable) {
		t.Skipf("overlayfs cannot be mounted here (needs CAP_SYS_ADMIN and overlayfs): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer m.Unmount()
	if m.Upper() != filepath.Join(base, "layer") || m.UserXattr() {
		t.Fatalf("Upper() = %q, UserXattr() = %v", m.Upper(), m.UserXattr())
	}
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var opts string
	for _, line := range strings.Split(string(info), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dest {
			opts = line
		}
	}
	if !strings.Contains(opts, "redirect_dir=nofollow") || strings.Contains(opts, "metacopy=on") || strings.Contains(opts, "index=on") {
		t.Fatalf("the mount's options are %q, want redirect_dir=nofollow and neither metacopy nor index", opts)
	}
	if err := os.Rename(filepath.Join(dest, "dir"), filepath.Join(dest, "moved")); !errors.Is(err, unix.EXDEV) {
		t.Fatalf("renaming a lower directory: %v, want EXDEV (no redirect made)", err)
	}
	if err := os.Chmod(filepath.Join(dest, "mode.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dest, "again")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dest, "again", "c.txt"), "c\n")
	buf := make([]byte, 64)
	upper := m.Upper()
	for _, rel := range []string{"mode.sh", "again", "again/c.txt"} {
		for _, x := range []string{"trusted.overlay.redirect", "trusted.overlay.metacopy"} {
			if n, err := unix.Lgetxattr(filepath.Join(upper, rel), x, buf); !errors.Is(err, unix.ENODATA) {
				t.Errorf("%s in the layer has %s (%q, %v)", rel, x, buf[:max(n, 0)], err)
			}
		}
	}
	if n, err := unix.Lgetxattr(filepath.Join(upper, "again"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Fatalf("again/, removed and made again, is not opaque in the layer: %q, %v", buf[:max(n, 0)], err)
	}
	if data, err := os.ReadFile(filepath.Join(upper, "mode.sh")); err != nil || string(data) != "echo\n" {
		t.Fatalf("the chmod did not copy mode.sh's data up: %q, %v", data, err)
	}
}
