package backend

import (
	"slices"
	"strings"
	"testing"
)

// TestEnvPathDropsSources: a PATH entry inside the source's worktree or
// inside its separate git directory would name a hidden path to Case; both
// are dropped, the rest kept in order.
func TestEnvPathDropsSources(t *testing.T) {
	env := Env("/scratch", "", "/usr/bin:/src/bin:/store/repo.git/hooks:/bin:rel", "/src", "/store/repo.git")
	var path string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if path != "/usr/bin:/bin" {
		t.Fatalf("PATH=%q, want /usr/bin:/bin", path)
	}
	if strings.Contains(strings.Join(env, "\n"), "/store/repo.git") || strings.Contains(strings.Join(env, "\n"), "/src") {
		t.Fatalf("the environment names a source path: %q", env)
	}
}

// ReplaceEnv leaves one entry per variable, the set's.
func TestReplaceEnv(t *testing.T) {
	got := ReplaceEnv([]string{"HOME=/h", "GOCACHE=/scratch/go", "A=1"}, []string{"GOCACHE=/host/go", "B=2"})
	want := []string{"A=1", "B=2", "GOCACHE=/host/go", "HOME=/h"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if v := EnvValue(got, "GOCACHE"); v != "/host/go" {
		t.Errorf("EnvValue = %q", v)
	}
	if v := EnvValue(got, "NONE"); v != "" {
		t.Errorf("EnvValue of an unset variable = %q", v)
	}
}
