package validators_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/validators"
)

// TestRunStopsWhenCancelled: a cancelled validation (SIGTERM/SIGINT reach it
// as a cancelled context) stops and is never reported as valid.
func TestRunStopsWhenCancelled(t *testing.T) {
	dir, set, _ := passRun(t)
	if res := validators.Run(context.Background(), dir, set, validators.RunOptions{ExpectPass: true}); !res.OK {
		t.Fatalf("the pass run does not validate: %v", res.Errors)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res := validators.Run(ctx, dir, set, validators.RunOptions{ExpectPass: true})
	if res.OK || len(res.Errors) == 0 || !strings.Contains(res.Errors[0].String(), "interrupted") {
		t.Fatalf("a cancelled validation must fail and say why: ok=%v errors %v", res.OK, res.Errors)
	}
}
