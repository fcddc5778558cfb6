package sandbox

import "testing"

// A batch probes once: an available sandbox is remembered, a failed probe is
// asked again (a transient failure must not block every later run).
func TestReuseKeepsOnlyAnAvailableAnswer(t *testing.T) {
	calls := 0
	answers := []Facts{{Reason: "cannot create a user namespace"}, {Launcher: true, LandlockABI: 4}}
	probe := reuse(func() Facts {
		f := answers[calls]
		calls++
		return f
	})
	if f := probe(); f.Available() || f.Reason == "" {
		t.Fatalf("first probe = %+v, want the failure", f)
	}
	if f := probe(); !f.Available() || f.LandlockABI != 4 {
		t.Fatalf("second probe = %+v, want the available answer", f)
	}
	if f := probe(); !f.Available() || calls != 2 {
		t.Fatalf("third probe = %+v after %d probes, want the remembered answer without probing again", f, calls)
	}
}
