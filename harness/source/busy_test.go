package source

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
)

func TestClassifyBusySource(t *testing.T) {
	host, _ := os.Hostname()
	now := time.Now()
	tests := []struct {
		name string
		file string // under .git
		data string
		age  time.Duration
		busy bool
	}{
		{"index lock", "index.lock", "", 0, true},
		{"maintenance lock", "objects/maintenance.lock", "", 0, true},
		{"ref lock", "refs/heads/main.lock", "", 0, true},
		{"packed-refs lock", "packed-refs.lock", "", 0, true},
		{"any lock in .git", "FETCH_HEAD.lock", "", 0, true},
		{"a pack being written", "objects/pack/tmp_pack_x.lock", "", 0, true},
		{"gc of a live process", "gc.pid", fmt.Sprintf("%d %s", os.Getpid(), host), 0, true},
		{"gc of another host", "gc.pid", "12345 some-other-host", 0, true},
		{"gc that ended without cleaning up", "gc.pid", fmt.Sprintf("%d %s", deadPID(t), host), 0, false},
		{"gc older than git's twelve hours", "gc.pid", "12345 some-other-host", 13 * time.Hour, false},
		{"an ordinary .git", "", "", 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := newLayout(t)
			repo := filepath.Join(l.owned, "repo")
			if tc.file != "" {
				p := filepath.Join(repo, ".git", filepath.FromSlash(tc.file))
				mkdir(t, filepath.Dir(p))
				writeFile(t, p, tc.data)
				if tc.age > 0 {
					old := now.Add(-tc.age)
					if err := os.Chtimes(p, old, old); err != nil {
						t.Fatal(err)
					}
				}
			}
			pol := l.policy()
			pol.Now = func() time.Time { return now }
			_, err := Classify(context.Background(), repo, pol, &recorder{})
			if !tc.busy {
				if err != nil {
					t.Fatalf("Classify: %v", err)
				}
				return
			}
			b := blockerOf(t, err)
			if b.Code != ctoharness.BlockSourceBusy || b.Step != ctoharness.StepClassify || !strings.Contains(b.Message, tc.file) {
				t.Fatalf("blocker %+v, want %s naming %s", b, ctoharness.BlockSourceBusy, tc.file)
			}
		})
	}
}

// deadPID is the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Skipf("cannot start /bin/true: %v", err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}
