package validators

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/backend/fakecase"
	"github.com/cto-harness/cto-harness/harness/task"
)

// The history rows pass because Case finds no marker; this is their
// control: run on the source itself, which holds every planted object,
// the same search finds the marker in each place a leak would be.
func TestLeakSearchFindsThePlantedLeaks(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := materialize(context.Background(), fixtures.SampleOwned, src, when); err != nil {
		t.Fatal(err)
	}
	if err := plantLeaks(src, when); err != nil {
		t.Fatal(err)
	}
	contract := task.Contract{RunID: "control", Task: "t", AllowedPaths: []string{"docs/**"}}
	data, _ := json.Marshal(contract)
	taskFile := filepath.Join(t.TempDir(), "task.json")
	if err := os.WriteFile(taskFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(src)
	var out bytes.Buffer
	getenv := func(k string) string {
		if k == "CASE_TASK_FILE" {
			return taskFile
		}
		return os.Getenv(k)
	}
	if code := fakecase.Main([]string{"search-git=" + LeakMarker}, &out, io.Discard, getenv); code != 0 {
		t.Fatalf("the fake Case exited %d: %s", code, out.String())
	}
	var attempt struct {
		Denied bool `json:"denied"`
		Finds  int  `json:"finds"`
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, `"attempt":"search-git"`) {
			if err := json.Unmarshal([]byte(line), &attempt); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every object go-git iterates is one find: the future commit, its
	// tree and answer blob, the tag, the stash's commit/tree/blob, the
	// note's blob, the reflog commit/tree/blob and the dangling blob.
	if attempt.Denied || attempt.Finds < 10 {
		t.Errorf("the search found the marker %d times (denied %v) in a source that holds it in 12 objects:\n%s", attempt.Finds, attempt.Denied, out.String())
	}
	notes, _ := os.ReadFile(filepath.Join(src, "docs", "CASE_NOTES.md"))
	for _, where := range []string{"git log --all --reflog -p", "git cat-file --batch-all-objects --batch", "object "} {
		if !strings.Contains(string(notes), where) {
			t.Errorf("the search did not find the marker through %q:\n%s", where, notes)
		}
	}
}
