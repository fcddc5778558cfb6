package cli

import (
	"context"
	"errors"
	"os"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/gates"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/source"
)

// Bad input is found here, before harness.Run: a run that starts writes a
// signed run directory and a cost-ledger line, and a typing mistake must
// leave neither. What is refused here is what a person fixes on the command
// line or in a file they named; what the gate or the source policy refuses
// (a missing stage record, a repository that is not owned) is a real run's
// blocker and keeps its evidence.

// checkSource refuses a stage that copies a repository without --source, and
// a --source that does not exist or is not a directory. It classifies the
// path as the run would, so a path under a Target Repository or external
// root is still refused by the run, unread, and never touched here.
func checkSource(ctx context.Context, stage int, path string, cfg config.Config) error {
	st, err := gates.Lookup(stage)
	if err != nil {
		return nil // the run refuses an unknown stage itself, as bad input
	}
	if path == "" {
		if st.Fixture == gates.FixtureOwnedRepo {
			return usagef("stage %d copies a repository you own, and --source is missing; pass --source PATH, the local path of a git worktree under an owned root", st.N)
		}
		return nil
	}
	pol := source.Policy{Owned: cfg.OwnedSources, TargetRoots: cfg.TargetRoots, ExternalRoots: cfg.ExternalRoots, ConfigFile: cfg.Path}
	_, err = source.Classify(ctx, path, pol, ctoharness.NopTracer{})
	var be *ctoharness.BlockerError
	if !errors.As(err, &be) {
		return nil
	}
	switch be.Blocker.Code {
	case ctoharness.BlockSourceNotFound:
		return usagef("--source %s does not exist; pass the local path of a git worktree", path)
	case ctoharness.BlockSourceNotGit:
		// Classification passed the fence, so the path may be looked at.
		if fi, serr := os.Stat(path); serr == nil && !fi.IsDir() {
			return usagef("--source %s is a file, not a directory; pass the root directory of a git worktree", path)
		}
	}
	return nil
}

// checkInputFile refuses a file argument (named by what, for example
// "--task") that names no readable file; what the file holds is checked when
// it is loaded. kind and doc say what the file should be and where it is
// described.
func checkInputFile(what, path, kind, doc string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return usagef("%s %s does not exist; pass the path of %s (%s)", what, path, kind, doc)
	case err != nil:
		return usagef("%s %s cannot be read: %v; check the path and its permissions", what, path, err)
	case fi.IsDir():
		return usagef("%s %s is a directory; pass the path of %s (%s)", what, path, kind, doc)
	}
	return nil
}
