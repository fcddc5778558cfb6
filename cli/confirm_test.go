package cli

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/step/adversary"
)

// The question shows the tests and takes only a yes as a yes; an
// interrupt while it waits, or a closed input, is never one.
func TestAskOn(t *testing.T) {
	s := adversary.Summary{TestCommand: "sh adv/run.sh", Kept: []adversary.File{{Path: "adv/run.sh", Data: []byte("echo ok\n")}}}
	for _, c := range []struct {
		answer string
		yes    bool
		err    bool
	}{{"y\n", true, false}, {"YES\n", true, false}, {"\n", false, false}, {"n\n", false, false}, {"yep\n", false, false}, {"", false, true}} {
		var out strings.Builder
		yes, err := askOn(strings.NewReader(c.answer), &out)(context.Background(), s)
		if yes != c.yes || (err != nil) != c.err {
			t.Errorf("answer %q: yes %v, err %v", c.answer, yes, err)
		}
		if !strings.Contains(out.String(), "adv/run.sh") || !strings.Contains(out.String(), "Run them? [y/N]") {
			t.Errorf("the question shown:\n%s", out.String())
		}
	}
	pr, pw := io.Pipe()
	defer pw.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if yes, err := askOn(pr, io.Discard)(ctx, s); yes || err == nil {
		t.Errorf("an interrupted question gave yes %v, err %v", yes, err)
	}
	if terminalConfirm(&Env{Stdin: strings.NewReader("y\n"), Stderr: io.Discard}) != nil {
		t.Error("a reader that is not a terminal was taken for a person")
	}
}
