package gitstatus

import (
	"fmt"

	ctoharness "github.com/cto-harness/cto-harness"
)

// UnsupportedError is a repository state the status route refuses rather
// than guess at: one whose status git would compute by running a program
// the repository configures (a filter, an fsmonitor hook), or a format or
// layout the route does not read. Code is the blocker the caller raises.
type UnsupportedError struct {
	Code   ctoharness.BlockerCode
	Reason string
}

func (e *UnsupportedError) Error() string { return e.Reason }

func refuse(code ctoharness.BlockerCode, format string, args ...any) error {
	return &UnsupportedError{Code: code, Reason: fmt.Sprintf(format, args...)}
}
