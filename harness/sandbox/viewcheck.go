package sandbox

import (
	"context"
	"fmt"
	"time"
)

// Trial is what one trial launch of a policy established.
type Trial struct {
	View      []Mount       // the view as the launcher built it
	BuildTime time.Duration // how long building the view took inside the launcher
}

// Try establishes p once in a throwaway launcher, started in dir, without
// running any command. The harness calls it before it starts Case, so a view
// that cannot be built (a missing path, a refused mount) blocks the run
// before any Case process exists. The error is the launcher's own reason.
func Try(ctx context.Context, self string, p Policy, dir string) (Trial, error) {
	got, err := tryPolicy(ctx, self, p, dir)
	if err != nil {
		return Trial{}, err
	}
	if p.View != nil && len(got.View) == 0 {
		return Trial{}, fmt.Errorf("the launcher did not report the filesystem view it was asked to build")
	}
	return Trial{View: got.View, BuildTime: time.Duration(got.ViewBuildNs)}, nil
}
