package runlist_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cto-harness/cto-harness/harness/runlist"
)

func mounted(t *testing.T, dir string) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// TestPruneDetachesOnlyAKilledRunsMounts: a run killed mid-way leaves its
// overlay fixture and checkout mounted; prune detaches them, but never the
// mounts of a run that is still in progress (its directory is held), nor
// does a dry run.
func TestPruneDetachesOnlyAKilledRunsMounts(t *testing.T) {
	runs := t.TempDir()
	mount := func(id string) (fixture, checkout string) {
		fixture = filepath.Join(runs, id, "fixture")
		checkout = filepath.Join(runs, runlist.WorkDir, id, "verify", "checkout")
		for _, d := range []string{fixture, checkout} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=64k"); err != nil {
				t.Skipf("cannot mount a tmpfs here (needs CAP_SYS_ADMIN): %v", err)
			}
			t.Cleanup(func() { _ = unix.Unmount(d, unix.MNT_DETACH) })
		}
		return fixture, checkout
	}
	liveFixture, liveCheckout := mount("20260301T100000Z-s3-live0000")
	release, err := runlist.Hold(filepath.Join(runs, "20260301T100000Z-s3-live0000"))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	deadFixture, deadCheckout := mount("20260301T100000Z-s3-dead0000")

	p, err := runlist.Prune(runs, 10, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Unmounted) != 2 || !mounted(t, deadFixture) || !mounted(t, deadCheckout) {
		t.Fatalf("dry run: would unmount %v (want the dead run's two), and must not unmount", p.Unmounted)
	}
	if p, err = runlist.Prune(runs, 10, false); err != nil {
		t.Fatal(err)
	}
	if len(p.Unmounted) != 2 || mounted(t, deadFixture) || mounted(t, deadCheckout) {
		t.Fatalf("unmounted %v; the dead run's mounts must be gone", p.Unmounted)
	}
	if !mounted(t, liveFixture) || !mounted(t, liveCheckout) {
		t.Fatal("a live run's mounts were detached")
	}
	release()
	if p, err = runlist.Prune(runs, 10, false); err != nil || len(p.Unmounted) != 2 || mounted(t, liveFixture) {
		t.Fatalf("once released: %v %v", p.Unmounted, err)
	}
}

// A failure-matrix replay in progress holds its own folder: prune leaves
// the mounts below it and the folder itself, and detaches a killed
// replay's mounts before it removes that replay's folder.
func TestPruneLeavesALiveReplaysMounts(t *testing.T) {
	runs := t.TempDir()
	mount := func(folder string) string {
		d := filepath.Join(runs, runlist.MatrixDir, folder, "runs", runlist.WorkDir, "20260301T100000Z-s3-aaaa0000", "verify", "checkout")
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", 0, "size=64k"); err != nil {
			t.Skipf("cannot mount a tmpfs here (needs CAP_SYS_ADMIN): %v", err)
		}
		t.Cleanup(func() { _ = unix.Unmount(d, unix.MNT_DETACH) })
		return d
	}
	live, dead := mount("timeout-1"), mount("timeout-2")
	release, err := runlist.Hold(filepath.Join(runs, runlist.MatrixDir, "timeout-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	p, err := runlist.Prune(runs, 10, false)
	if err != nil {
		t.Fatal(err)
	}
	if !mounted(t, live) || !exists(live) {
		t.Fatal("a live replay's mount was detached or its folder removed")
	}
	if mounted(t, dead) || len(p.Unmounted) != 1 || len(p.Matrix.Removed) != 1 || exists(filepath.Join(runs, runlist.MatrixDir, "timeout-2")) {
		t.Fatalf("the killed replay: unmounted %v, removed %+v; want its mount detached and its folder removed", p.Unmounted, p.Matrix.Removed)
	}
}
