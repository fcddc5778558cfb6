package validators_test

import (
	"context"
	"os"
	"testing"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/validators"
)

// A stage is validated with the user's own config, so the runs must see the
// host environment that config draws on: with caches.go the harness asks
// the host's go where its caches are, which it answers from HOME. Given
// only PATH, go printed an empty GOCACHE and every stage run was refused
// CONFIG_INVALID, though the same config ran stage 3 fine.
func TestStageWithWarmGoCacheSeesHostHome(t *testing.T) {
	o, _ := stageOpts(t, t.TempDir())
	home := t.TempDir()
	o.HostEnv = func(k string) string {
		switch k {
		case "PATH":
			return os.Getenv("PATH")
		case "HOME":
			return home
		}
		return ""
	}
	o.Config = config.Config{Caches: &config.Caches{Go: true}}
	res := validators.Stage(context.Background(), 1, o)
	if !res.OK {
		t.Fatalf("stage 1 with caches.go and HOME=%s: %v", home, res.Errors)
	}
}
