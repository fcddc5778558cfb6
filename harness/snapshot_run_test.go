package harness_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runlist"
	"github.com/cto-harness/cto-harness/harness/snapshot"
	"github.com/cto-harness/cto-harness/harness/task"
)

// copiedSnapshot is the snapshot the run's fixture_copied event names; nil
// when the fixture was not an overlay of one (this machine cannot mount).
func copiedSnapshot(t *testing.T, rep *ctoharness.Report) map[string]any {
	t.Helper()
	snap, _ := fixtureCopied(t, rep)["snapshot"].(map[string]any)
	return snap
}

// fixtureCopied is the data of the run's fixture_copied event.
func fixtureCopied(t *testing.T, rep *ctoharness.Report) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		var e struct {
			Type ctoharness.EventType `json:"type"`
			Data map[string]any       `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Type == ctoharness.EvFixtureCopied {
			return e.Data
		}
	}
	t.Fatal("no fixture_copied event")
	return nil
}

func runOnce(t *testing.T, o harness.Options) *ctoharness.Report {
	t.Helper()
	rep, err := harness.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestSnapshotAcrossRuns: a sandboxed run's fixture is an overlay of the
// snapshot of its base, made by the first run at the commit and reused by
// the next without being written again; a user editing the source during
// a run no longer changes what Case sees (the run still ends
// SOURCE_MUTATED); and a snapshot changed after its record blocks the next
// run with SNAPSHOT_CHANGED, which still writes its evidence.
func TestSnapshotAcrossRuns(t *testing.T) {
	set := compile(t)
	base, src := stage3(t, set)
	first := runOnce(t, base)
	snap := copiedSnapshot(t, first)
	if snap == nil {
		t.Skip("this machine cannot mount an overlay: fixtures are copies, with no snapshot")
	}
	if first.Status != ctoharness.StatusPass || snap["made"] != true {
		t.Fatalf("first run: status %s blockers %v, snapshot %v", first.Status, first.Blockers, snap)
	}
	mustValidate(t, set, first, true)
	dir := filepath.Join(snapshot.Root(base.RunsDir), snap["key"].(string))
	var before unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, snapshot.RecordFile), &before); err != nil {
		t.Fatal(err)
	}

	t.Run("reused", func(t *testing.T) {
		rep := runOnce(t, base)
		again := copiedSnapshot(t, rep)
		if rep.Status != ctoharness.StatusPass || again["made"] != false || again["key"] != snap["key"] || again["record_sha256"] != snap["record_sha256"] {
			t.Fatalf("second run: status %s blockers %v, snapshot %v (first %v)", rep.Status, rep.Blockers, again, snap)
		}
		var after unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, snapshot.RecordFile), &after); err != nil {
			t.Fatal(err)
		}
		if after.Ino != before.Ino || after.Mtim != before.Mtim || after.Ctim != before.Ctim {
			t.Fatal("the second run made the snapshot again")
		}
		mustValidate(t, set, rep, true)
	})

	t.Run("source edited during the run", func(t *testing.T) {
		readme := filepath.Join(src, "README.md")
		orig, err := os.ReadFile(readme)
		if err != nil {
			t.Fatal(err)
		}
		defer os.WriteFile(readme, orig, 0o644)
		o := base
		id := "run-snapshot-edit"
		o.NewRunID = func(int, time.Time) string { return id }
		marker := filepath.Join(o.RunsDir, runlist.WorkDir, id, "scratch", "tmp", "source-edited")
		o.Scenario = "await-copy=" + marker
		// The scratch is made as Case is about to start, after the
		// fixture: the source is edited then, and Case told.
		go func() {
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Lstat(filepath.Dir(marker)); err == nil {
					break
				}
			}
			_ = os.WriteFile(readme, append(append([]byte{}, orig...), "edited during the run\n"...), 0o644)
			_ = os.WriteFile(marker, nil, 0o644)
		}()
		rep := runOnce(t, o)
		if !hasCode(rep, ctoharness.BlockSourceMutated) || !rep.SourceRepositoryMutated {
			t.Fatalf("status %s blockers %v: the edit was not caught", rep.Status, rep.Blockers)
		}
		patch, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.PatchFile))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(patch), "+README.md: "+strings.SplitN(string(orig), "\n", 2)[0]) || strings.Contains(string(patch), "edited during the run") {
			t.Fatalf("what Case saw of README.md is not the commit's:\n%s\nblockers %v", patch, rep.Blockers)
		}
		mustValidate(t, set, rep, false)
	})

	t.Run("before-proof changed while set aside", func(t *testing.T) {
		o := base
		id := "run-aside-edit"
		o.NewRunID = func(int, time.Time) string { return id }
		work := filepath.Join(o.RunsDir, runlist.WorkDir, id)
		marker := filepath.Join(work, "scratch", "tmp", "aside-edited")
		o.Scenario = "await-copy=" + marker
		// While Case runs, something on the host rewrites one byte of the
		// packed before-proof the run set aside in its workspace.
		go func() {
			for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if _, err := os.Lstat(filepath.Dir(marker)); err == nil {
					break
				}
			}
			p := filepath.Join(work, "source-before.packed")
			if data, err := os.ReadFile(p); err == nil && len(data) > 0 {
				data[len(data)/2] ^= 1
				_ = os.WriteFile(p, data, 0o600)
			}
			_ = os.WriteFile(marker, nil, 0o644)
		}()
		rep := runOnce(t, o)
		if !hasCode(rep, ctoharness.BlockSourceMutated) || !rep.SourceRepositoryMutated || rep.Status == ctoharness.StatusPass {
			t.Fatalf("status %s blockers %v: a changed before-proof was compared as if it were the run's", rep.Status, rep.Blockers)
		}
		found := false
		for _, b := range rep.Blockers {
			found = found || strings.Contains(b.Message, "set aside")
		}
		if !found {
			t.Fatalf("no blocker says the set-aside before-proof changed: %v", rep.Blockers)
		}
		mustValidate(t, set, rep, false)
	})

	t.Run("changed after its record", func(t *testing.T) {
		p := filepath.Join(dir, snapshot.TreeDir, "README.md")
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteString("changed in the snapshot\n")
		f.Close()
		rep := runOnce(t, base)
		if !hasCode(rep, ctoharness.BlockSnapshotChanged) || rep.Status == ctoharness.StatusPass || rep.CaseProcessStarted {
			t.Fatalf("status %s blockers %v, Case started %v: want SNAPSHOT_CHANGED before Case", rep.Status, rep.Blockers, rep.CaseProcessStarted)
		}
		if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, evidence.ReportJSON)); err != nil {
			t.Fatal(err)
		}
		mustValidate(t, set, rep, false)
	})
}

// TestCheckoutTakesTheFixturesClosure: with the whole history kept, the
// verification checkout's store holds the base's history as the fixture's
// does (its commits all there and connected), though it is copied from the
// closure the fixture shared rather than walked again; the second run at
// the commit copies the fixture's store too from the closure the first
// recorded, and holds the same history.
func TestCheckoutTakesTheFixturesClosure(t *testing.T) {
	set := compile(t)
	o, src := stage3(t, set)
	gitSrc := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "gc.auto=0"}, args...)...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(src, "HISTORY.txt"), []byte(strings.Repeat("x", i+1)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		gitSrc("add", "HISTORY.txt")
		gitSrc("commit", "-q", "-m", "history "+string(rune('a'+i)))
	}
	n := gitSrc("rev-list", "--count", "HEAD")
	o.Spec = historySpec(o.Spec, n)
	for i, name := range []string{"first", "second"} {

		rep := runOnce(t, o)
		if copiedSnapshot(t, rep) == nil {
			t.Skip("this machine cannot mount an overlay: no snapshot, no shared closure for the checkout")
		}
		// The first run walks the history and records its closure; the
		// second copies the fixture's store from it.
		if reused := fixtureCopied(t, rep)["closure_reused"]; reused != (i == 1) {
			t.Fatalf("%s run: closure_reused %v", name, reused)
		}
		if rep.Status != ctoharness.StatusPass {
			log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
			t.Fatalf("%s run: status %s blockers %v\n%s", name, rep.Status, rep.Blockers, log)
		}
		mustValidate(t, set, rep, true)
	}
	// A kept fixture is a copy, with no snapshot: the checkout still takes
	// the closure the baseline shared (no submodule's objects joined it).
	o.KeepWork = true
	rep := runOnce(t, o)
	if rep.Status != ctoharness.StatusPass || fixtureCopied(t, rep)["overlay"] != false {
		log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
		t.Fatalf("kept work: status %s blockers %v, fixture_copied %v\n%s", rep.Status, rep.Blockers, fixtureCopied(t, rep), log)
	}
	mustValidate(t, set, rep, true)
}

// historySpec keeps the whole history and checks, in the verification
// checkout, that it holds the source's n commits plus the baseline and the
// result, all connected.
func historySpec(s *task.Spec, n string) *task.Spec {
	spec := *s
	spec.History = "full"
	spec.Verification.Command = `test "$(git rev-list --count HEAD)" -eq "$((` + n + ` + 2))" && git fsck --connectivity-only --no-progress && ` + spec.Verification.Command
	return &spec
}

// TestClosureShownNotCopied: a run at a base whose closure an earlier run
// recorded shows the closure's objects below the snapshot, in the fixture
// and in the verification checkout, rather than copying them; a Case that
// rewrites every object its .git holds changes only its own copies, and
// one that writes into the runs directory's closures is denied: the
// closure is byte for byte what it was, and the checkout's history (all
// its commits connected) still checks.
func TestClosureShownNotCopied(t *testing.T) {
	set := compile(t)
	o, _ := stage3(t, set)
	o.Spec = historySpec(o.Spec, "1")
	rep := runOnce(t, o)
	if copiedSnapshot(t, rep) == nil {
		t.Skip("this machine cannot mount an overlay: no snapshot, no shared closure")
	}
	if rep.Status != ctoharness.StatusPass {
		t.Fatalf("first run: %s %v", rep.Status, rep.Blockers)
	}
	closures := filepath.Join(o.RunsDir, "closures")
	layers, _ := filepath.Glob(filepath.Join(closures, "*", "layer", ".git", "objects"))
	if len(layers) == 0 {
		t.Fatalf("no closure in %s has a layer to show", closures)
	}
	before := treeState(t, closures)

	o.Scenario = "write-objects=" + filepath.Dir(filepath.Dir(filepath.Dir(layers[0])))
	rep = runOnce(t, o)
	if rep.Status != ctoharness.StatusPass || fixtureCopied(t, rep)["closure_reused"] != true {
		log, _ := os.ReadFile(filepath.Join(rep.RunArtifactDir, "test.log"))
		t.Fatalf("second run: %s %v, fixture_copied %v\n%s", rep.Status, rep.Blockers, fixtureCopied(t, rep), log)
	}
	mustValidate(t, set, rep, true)
	events, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, evidence.EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	own, closure := 0, 0
	for line := range strings.Lines(string(events)) {
		var e struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		switch e.Data["attempt"] {
		case "list-closures":
			n, _ := e.Data["own_objects_rewritten"].(float64)
			own = int(n)
			if e.Data["own_objects_failed"] != 0.0 {
				t.Errorf("Case could not rewrite %v of its own objects", e.Data["own_objects_failed"])
			}
		case "write-closure":
			closure++
			if e.Data["denied"] != true {
				t.Errorf("Case wrote %v in the runs directory's closures", e.Data["target"])
			}
		}
	}
	if own == 0 || closure < 3 {
		t.Fatalf("the scenario rewrote %d of its objects and tried %d closure writes", own, closure)
	}
	trace, err := os.ReadFile(filepath.Join(rep.RunArtifactDir, "trace.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(trace)) {
		var e ctoharness.TraceEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		if e.Op == ctoharness.TraceWrite && strings.HasSuffix(e.Path, "/.git/objects") {
			t.Errorf("the run wrote %s: the closure's objects are shown there, not copied", e.Path)
		}
	}
	if after := treeState(t, closures); after != before {
		t.Fatalf("the closures changed under a run that showed them:\nbefore %s\nafter  %s", before, after)
	}
}

// treeState is every entry below root with its mode, size, inode and
// content: what a change to any of them changes.
func treeState(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %o %d %d", strings.TrimPrefix(p, root), st.Mode, st.Size, st.Ino)
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, " %x", sha256.Sum256(data))
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestUnpopulatedSubmoduleSnapshot: a tree with a submodule the source does
// not populate (git/git's sha1collisiondetection, in most clones) has a
// snapshot, in which the submodule is the empty directory git leaves: the
// fixture is an overlay of it, the second run reuses the first's closure
// instead of walking the history again, and a Case that writes inside the
// submodule is refused at the collect, as a copied fixture's collect
// refuses it.
func TestUnpopulatedSubmoduleSnapshot(t *testing.T) {
	set := compile(t)
	o, src := stage3(t, set)
	gitSrc := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		cmd.Dir = src
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(src, ".gitmodules"), []byte("[submodule \"vendor/sub\"]\n\tpath = vendor/sub\n\turl = https://example.invalid/sub.git\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitSrc("add", ".gitmodules")
	gitSrc("update-index", "--add", "--cacheinfo", "160000,"+strings.Repeat("ab", 20)+",vendor/sub")
	gitSrc("commit", "-q", "-m", "an unpopulated submodule")
	if err := os.MkdirAll(filepath.Join(src, "vendor", "sub"), 0o755); err != nil { // as git clone leaves it
		t.Fatal(err)
	}
	for i, name := range []string{"first", "second"} {
		rep := runOnce(t, o)
		if copiedSnapshot(t, rep) == nil {
			t.Skip("this machine cannot mount an overlay: no snapshot")
		}
		if rep.Status != ctoharness.StatusPass || fixtureCopied(t, rep)["closure_reused"] != (i == 1) {
			t.Fatalf("%s run: %s %v, fixture_copied %v", name, rep.Status, rep.Blockers, fixtureCopied(t, rep))
		}
		mustValidate(t, set, rep, true)
	}
	o.Scenario = "write-file=vendor/sub/x.txt"
	rep := runOnce(t, o)
	if rep.Status != ctoharness.StatusBlocked || len(rep.Blockers) == 0 || rep.Blockers[0].Code != ctoharness.BlockCollectFailed ||
		!strings.Contains(rep.Blockers[0].Message, "submodule vendor/sub") {
		t.Fatalf("a write inside the unpopulated submodule: %s %v, want %s naming vendor/sub", rep.Status, rep.Blockers, ctoharness.BlockCollectFailed)
	}
	mustValidate(t, set, rep, false)
}
