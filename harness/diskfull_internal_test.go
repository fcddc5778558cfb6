package harness

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/cto-harness/cto-harness/harness/runsink"
)

func TestNoSpace(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("permission denied"), false},
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("wrapped: %w", syscall.EDQUOT), true},
		{fmt.Errorf("kept only as text: %v", &os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}), true},
	}
	for _, tc := range tests {
		if got := runsink.NoSpace(tc.err); got != tc.want {
			t.Errorf("runsink.NoSpace(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
