package backend

import (
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
