package task_test

import (
	"slices"
	"testing"

	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/schemas"
)

func TestSpecViewLists(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	validate := set.Validator(schemas.TaskSpec)
	base := `{"task":"t","allowed_paths":["docs/**"],"verification":{"command":"true","timeout_seconds":10}`
	s, err := task.Parse([]byte(base+`,"sandbox":{"read_paths":["/usr/share"],"hide_paths":["/opt/a"],"verification":{"hide_paths":["/opt/b"]}}}`), "t", validate)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.ViewLists(false); !slices.Equal(got.ReadPaths, []string{"/usr/share"}) || !slices.Equal(got.HidePaths, []string{"/opt/a"}) {
		t.Errorf("Case lists %+v", got)
	}
	if got := s.ViewLists(true); got.ReadPaths != nil || !slices.Equal(got.HidePaths, []string{"/opt/b"}) {
		t.Errorf("verification lists %+v", got)
	}
	plain, err := task.Parse([]byte(base+`}`), "t", validate)
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.ViewLists(true); got.ReadPaths != nil || got.HidePaths != nil {
		t.Errorf("a spec without a sandbox section has lists %+v", got)
	}
	if _, err := task.Parse([]byte(base+`,"sandbox":{"read_paths":["relative"]}}`), "t", validate); err == nil {
		t.Error("a relative read path was accepted")
	}
}
