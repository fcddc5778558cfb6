package validators

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
)

// RunVerifier is a stage gate's check of the run a previous stage's
// record names (StageRunVerifier).
type RunVerifier func(ctx context.Context, runDir string) (ctoharness.Report, error)

// RememberStageRuns wraps the gate's run check for the runs of one batch
// (or one failure-matrix replay). Every run's gate checks the same stage-2
// run, and validating it in full is a large share of a fake-lane run's
// processor time. A run that passed
// is checked again only when something in its directory changed since: its
// fingerprint covers every entry's path, type, mode, size, inode, and
// modification and change times. The change time cannot be set by a
// process; every write, rename, link or mode change moves it. A failed check
// is never remembered, and the gate still reads and verifies the stage
// record itself (signature, age, claims) for every trial.
func RememberStageRuns(verify RunVerifier) RunVerifier {
	var mu sync.Mutex
	type passed struct {
		print [32]byte
		rep   ctoharness.Report
	}
	seen := map[string]passed{}
	return func(ctx context.Context, runDir string) (ctoharness.Report, error) {
		before, err := fingerprint(runDir)
		if err != nil {
			return verify(ctx, runDir)
		}
		mu.Lock()
		p, ok := seen[runDir]
		mu.Unlock()
		if ok && p.print == before {
			return p.rep, nil
		}
		rep, err := verify(ctx, runDir)
		if err != nil {
			return rep, err
		}
		// Remembered only when nothing changed while it was checked.
		if after, ferr := fingerprint(runDir); ferr == nil && after == before {
			mu.Lock()
			seen[runDir] = passed{before, rep}
			mu.Unlock()
		}
		return rep, nil
	}
}

// fingerprint digests what every entry beneath dir is, without reading any
// file's content.
func fingerprint(dir string) ([32]byte, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat data", p)
		}
		fmt.Fprintf(h, "%q %o %d %d:%d %d.%d %d.%d\x00", p, info.Mode(), info.Size(), st.Dev, st.Ino,
			st.Mtim.Sec, st.Mtim.Nsec, st.Ctim.Sec, st.Ctim.Nsec)
		return nil
	})
	var sum [32]byte
	if err != nil {
		return sum, err
	}
	copy(sum[:], h.Sum(nil))
	return sum, nil
}
