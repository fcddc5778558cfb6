package config_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/schemas"
)

func TestSandboxLists(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	validate := set.Validator(schemas.Config)
	cases := []struct {
		name, json string
		ok         bool
		caseRead   []string
		verifyRead []string
	}{
		{"no sandbox section", `{"owned_sources":[],"target_repository_roots":[]}`, true, nil, nil},
		{"shared lists", `{"owned_sources":[],"target_repository_roots":[],"sandbox":{"read_paths":["/srv/agent"],"hide_paths":["/opt/x"]}}`,
			true, []string{"/srv/agent"}, []string{"/srv/agent"}},
		{"own verification lists", `{"owned_sources":[],"target_repository_roots":[],"sandbox":{"read_paths":["/srv/agent"],"verification":{"read_paths":["/srv/data"]}}}`,
			true, []string{"/srv/agent"}, []string{"/srv/data"}},
		{"relative read path", `{"owned_sources":[],"target_repository_roots":[],"sandbox":{"read_paths":["srv"]}}`, false, nil, nil},
		{"relative verification hide path", `{"owned_sources":[],"target_repository_roots":[],"sandbox":{"verification":{"hide_paths":["x"]}}}`, false, nil, nil},
		{"unknown key", `{"owned_sources":[],"target_repository_roots":[],"sandbox":{"write_paths":["/x"]}}`, false, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "config.json")
			if err := os.WriteFile(p, []byte(c.json), 0o644); err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(p, validate)
			if (err == nil) != c.ok {
				t.Fatalf("Load: %v, want ok=%v", err, c.ok)
			}
			if !c.ok {
				return
			}
			if cfg.Path != p {
				t.Errorf("Path %q, want %q", cfg.Path, p)
			}
			if got := cfg.Lists(false).ReadPaths; !slices.Equal(got, c.caseRead) {
				t.Errorf("Case read paths %v, want %v", got, c.caseRead)
			}
			if got := cfg.Lists(true).ReadPaths; !slices.Equal(got, c.verifyRead) {
				t.Errorf("verification read paths %v, want %v", got, c.verifyRead)
			}
		})
	}
}
