package validators_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/schemas"
	"github.com/cto-harness/cto-harness/validators"
)

// crashDisk is an ext4 filesystem on a loop device whose crash can be
// simulated: crash copies the backing image as it is on the "disk" at that
// moment, without syncing, and mounts the copy in its place. What was only
// in the page cache (data not yet written back, a journal transaction not
// yet committed: ext4 commits every 5 s and writes data back after 30 s) is
// lost, as on a power cut.
type crashDisk struct {
	t   *testing.T
	img string
	mnt string
}

func newCrashDisk(t *testing.T) *crashDisk {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("simulating a crash needs root (a loop device and mount)")
	}
	for _, tool := range []string{"mkfs.ext4", "mount", "umount", "cp"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("simulating a crash needs %s: %v", tool, err)
		}
	}
	dir := t.TempDir()
	d := &crashDisk{t: t, img: filepath.Join(dir, "disk.img"), mnt: filepath.Join(dir, "mnt")}
	if err := os.Mkdir(d.mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(d.img)
	if err == nil {
		err = f.Truncate(1 << 30) // sparse
		f.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", d.img).CombinedOutput(); err != nil {
		t.Skipf("cannot make an ext4 filesystem: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", d.img, d.mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a loop device (no loop support here?): %v: %s", err, out)
	}
	t.Cleanup(d.unmount)
	return d
}

func (d *crashDisk) unmount() {
	if out, err := exec.Command("umount", d.mnt).CombinedOutput(); err != nil {
		_ = exec.Command("umount", "-l", d.mnt).Run()
		d.t.Logf("umount %s: %v: %s", d.mnt, err, out)
	}
}

// crash takes the disk's state now and mounts it where the old one was.
func (d *crashDisk) crash() {
	d.t.Helper()
	crashed := d.img + ".crashed"
	if out, err := exec.Command("cp", "--sparse=always", d.img, crashed).CombinedOutput(); err != nil {
		d.t.Fatalf("copy the disk image: %v: %s", err, out)
	}
	d.unmount()
	d.img = crashed
	if out, err := exec.Command("mount", "-o", "loop", d.img, d.mnt).CombinedOutput(); err != nil {
		d.t.Fatalf("mount the crashed disk: %v: %s", err, out)
	}
}

// A crash right after validate-stage 2 loses nothing: the stage records,
// the runs they name (report, digests, events, proofs, the store the patch
// is re-derived from) were synced before the records were written, and the
// records before anything could depend on them.
func TestEvidenceSurvivesACrash(t *testing.T) {
	d := newCrashDisk(t)
	ctx := context.Background()
	runs := filepath.Join(d.mnt, "runs")
	o, set := stageOpts(t, runs)
	if res := validators.Stage(ctx, 2, o); !res.OK {
		t.Fatalf("stage 2: %v", res.Errors)
	}
	d.crash()
	check := gates.RecordCheck{Dir: harness.RecordsDir(runs), RunsDir: runs, MaxAge: 24 * time.Hour, Now: time.Now(),
		Validate: set.Validator(schemas.StageRecord), VerifyRun: validators.StageRunVerifier(set)}
	for n := 1; n <= 2; n++ {
		p := gates.RecordPath(check.Dir, n)
		fi, err := os.Stat(p)
		if err != nil || fi.Size() == 0 {
			t.Errorf("after the crash the stage %d record is lost or empty (%v)", n, err)
			continue
		}
		rec, err := check.Verify(ctx, n)
		if err != nil {
			t.Errorf("after the crash the stage %d record does not verify: %v", n, err)
			continue
		}
		if v := validators.Run(ctx, rec.RunDir, set, validators.RunOptions{}); !v.OK {
			t.Errorf("after the crash the stage %d run %s is invalid: %v", n, rec.RunDir, v.Errors)
		}
	}
}
