package harness_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/progress"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// A run with a progress line reports the copy (files and bytes), the
// baseline commit and the verification, and clears the line at the end.
func TestRunDrawsProgress(t *testing.T) {
	set := compile(t)
	runs := t.TempDir()
	var buf lockedBuffer
	o := options(t, set, runs, 1, env{})
	o.Progress = progress.New(&buf, time.Now, 0)
	rep, err := harness.Run(context.Background(), o)
	if err != nil || rep.Status != ctoharness.StatusPass {
		t.Fatalf("stage 1 run: %v %v", err, codes(rep))
	}
	out := buf.String()
	for _, want := range []string{"cto-harness: copy", " files, ", "cto-harness: baseline commit", "cto-harness: verification"} {
		if !strings.Contains(out, want) {
			t.Errorf("progress lacks %q: %q", want, out)
		}
	}
	if !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("the line is not cleared at the end: %q", out)
	}
	if _, err := os.Stat(filepath.Join(rep.RunArtifactDir, "report.html")); err != nil {
		t.Fatal(err)
	}
}
