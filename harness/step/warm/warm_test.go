package warm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/warmcache"
)

func getenvOf(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var (
	npm   = &warmcache.Npm{Cache: "/host/npm"}
	pip   = &warmcache.Pip{Cache: "/host/pip", Wheelhouse: "/host/wheels"}
	cargo = &warmcache.Cargo{Home: "/host/cargo"}
)

// Keys are every variable an offered cache may set: a toolchain setting
// one of them is refused even when the host has no cache yet.
func TestEcoKeys(t *testing.T) {
	cases := []struct {
		name string
		eco  Eco
		want []string
	}{
		{"none", Eco{}, nil},
		{"npm", Eco{npm: npm}, []string{"npm_config_cache", "npm_config_offline", "npm_config_prefer_offline"}},
		{"pip", Eco{pip: pip}, []string{"PIP_CACHE_DIR", "PIP_FIND_LINKS", "PIP_NO_INDEX"}},
		{"cargo", Eco{cargo: cargo}, []string{"CARGO_HOME", "CARGO_NET_OFFLINE"}},
		{"all", Eco{npm: npm, pip: pip, cargo: cargo}, []string{"CARGO_HOME", "CARGO_NET_OFFLINE", "PIP_CACHE_DIR", "PIP_FIND_LINKS", "PIP_NO_INDEX",
			"npm_config_cache", "npm_config_offline", "npm_config_prefer_offline"}},
	}
	for _, tc := range cases {
		if got := keysOf(tc.eco.Keys()); !slices.Equal(got, tc.want) {
			t.Errorf("%s: keys %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Pin answers the detections' first variables with the gate's finding and
// passes every other variable through.
func TestEcoPin(t *testing.T) {
	host := getenvOf(map[string]string{"npm_config_cache": "/elsewhere", "CARGO_HOME": "/moved", "PATH": "/usr/bin"})
	pinned := Eco{npm: npm, pip: pip, cargo: cargo}.Pin(host)
	for k, want := range map[string]string{pinNpm: "/host/npm", pinPip: "/host/pip", pinCargo: "/host/cargo", "PATH": "/usr/bin", "HOME": ""} {
		if got := pinned(k); got != want {
			t.Errorf("pinned %s = %q, want %q", k, got, want)
		}
	}
	plain := Eco{}.Pin(host)
	if got := plain(pinNpm); got != "/elsewhere" {
		t.Errorf("with no cache found, %s = %q, want the host's", pinNpm, got)
	}
}

// Env puts each tool in its offline mode unless the command may reach its
// registry; cargo's home is the command's own.
func TestEcoEnv(t *testing.T) {
	e := Eco{npm: npm, pip: pip, cargo: cargo}
	none := func(string) bool { return false }
	all := func(string) bool { return true }
	off := e.Env("/scratch/home", none)
	for _, want := range []string{"npm_config_prefer_offline=true", "npm_config_offline=true", "CARGO_HOME=/scratch/home/.cargo", "CARGO_NET_OFFLINE=true"} {
		if !slices.Contains(off, want) {
			t.Errorf("offline env %v lacks %s", off, want)
		}
	}
	on := e.Env("/scratch/home", all)
	for _, bad := range []string{"npm_config_offline=true", "CARGO_NET_OFFLINE=true"} {
		if slices.Contains(on, bad) {
			t.Errorf("env with every registry allowed %v holds %s", on, bad)
		}
	}
	if got := (Eco{}).Env("/h", none); len(got) != 0 {
		t.Errorf("no caches add %v", got)
	}
}

// Dirs are the host directories in the order the view shows them, cargo's
// inside the command's own home.
func TestEcoDirs(t *testing.T) {
	var got []string
	for _, d := range (Eco{npm: npm, pip: pip, cargo: cargo}).Dirs("/h") {
		got = append(got, d.Name+" "+d.Host+" "+d.At)
	}
	want := []string{"npm /host/npm /host/npm", "pip /host/pip /host/pip", "pip-wheelhouse /host/wheels /host/wheels",
		"cargo-registry /host/cargo/registry /h/.cargo/registry", "cargo-git /host/cargo/git /h/.cargo/git"}
	if !slices.Equal(got, want) {
		t.Errorf("dirs\n%v\nwant\n%v", got, want)
	}
}

// A cache inside the source, the runs directory or a configured root is
// refused at the gate with CONFIG_INVALID, naming the config key.
func TestDetectEcoProtectedRoots(t *testing.T) {
	root := t.TempDir()
	src, runs, owned := filepath.Join(root, "src"), filepath.Join(root, "runs"), filepath.Join(root, "owned")
	wheels := filepath.Join(owned, "wheels")
	if err := os.MkdirAll(wheels, 0o755); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "cache")
	cases := []struct {
		name   string
		caches config.Caches
		env    map[string]string
		owned  []string
		key    string // "" when the caches are offered
	}{
		{"npm in the source", config.Caches{Npm: true}, map[string]string{"npm_config_cache": filepath.Join(src, "npm")}, nil, "npm"},
		{"pip in the runs directory", config.Caches{Pip: true}, map[string]string{"PIP_CACHE_DIR": filepath.Join(runs, "pip")}, nil, "pip"},
		{"wheelhouse in an owned source", config.Caches{PipWheelhouse: wheels}, map[string]string{"PIP_CACHE_DIR": outside}, []string{owned}, "pip_wheelhouse"},
		{"cargo in the source", config.Caches{Cargo: true}, map[string]string{"CARGO_HOME": src}, nil, "cargo"},
		{"all outside", config.Caches{Npm: true, Pip: true, Cargo: true},
			map[string]string{"npm_config_cache": outside, "PIP_CACHE_DIR": outside, "CARGO_HOME": outside}, []string{owned}, ""},
		{"a root of / protects nothing", config.Caches{Npm: true}, map[string]string{"npm_config_cache": outside}, []string{"/"}, ""},
	}
	for _, tc := range cases {
		c := tc.caches
		in := Input{Config: config.Config{Caches: &c, OwnedSources: tc.owned}, Getenv: getenvOf(tc.env), Source: src, RunsDir: runs}
		_, err := DetectEco(context.Background(), in)
		if tc.key == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		b := ctoharness.AsBlocker(err, ctoharness.StepGate)
		if b.Code != ctoharness.BlockConfigInvalid || b.Step != ctoharness.StepGate || !errors.Is(err, warmcache.ErrUnavailable) ||
			!strings.HasPrefix(b.Message, "the config's caches."+tc.key+" cannot be offered: a warm cache must not be inside") {
			t.Errorf("%s: blocker %+v (err %v)", tc.name, b, err)
		}
	}
}

// A toolchain or variable that sets a cache's variable is refused: the
// caches' variables are the harness's.
func TestDetectEcoToolchainVariable(t *testing.T) {
	dir := t.TempDir()
	value := func(s string) *string { return &s }
	cases := []struct {
		name   string
		caches config.Caches
		env    []config.EnvVar
		want   string // the variable named, "" when offered
	}{
		{"CARGO_HOME for the verification", config.Caches{Cargo: true},
			[]config.EnvVar{{Name: "CARGO_HOME", Value: value("/opt/cargo"), For: []string{"verification"}}}, "CARGO_HOME"},
		{"npm's prefer-offline switch for Case", config.Caches{Npm: true},
			[]config.EnvVar{{Name: "npm_config_prefer_offline", Value: value("false"), For: []string{"case"}}}, "npm_config_prefer_offline"},
		{"CARGO_HOME with cargo off", config.Caches{Npm: true},
			[]config.EnvVar{{Name: "CARGO_HOME", Value: value("/opt/cargo"), For: []string{"setup"}}}, ""},
	}
	for _, tc := range cases {
		c := tc.caches
		in := Input{Config: config.Config{Caches: &c, Env: tc.env},
			Getenv: getenvOf(map[string]string{"npm_config_cache": dir, "CARGO_HOME": dir})}
		_, err := DetectEco(context.Background(), in)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		b := ctoharness.AsBlocker(err, ctoharness.StepGate)
		if b.Code != ctoharness.BlockConfigInvalid || !strings.HasPrefix(b.Message, "the warm caches set "+tc.want+" themselves;") {
			t.Errorf("%s: blocker %+v", tc.name, b)
		}
	}
}

// New refuses first what the toolchains cannot give, with the toolchain's
// own message, before any cache is looked for.
func TestNewToolchainsFirst(t *testing.T) {
	cfg := config.Config{Toolchains: []config.Toolchain{{Name: "none"}}, Caches: &config.Caches{Npm: true}}
	_, err := New(context.Background(), Input{Config: cfg, Getenv: getenvOf(nil)})
	b := ctoharness.AsBlocker(err, ctoharness.StepGate)
	if b.Code != ctoharness.BlockConfigInvalid || !strings.HasPrefix(b.Message, "the config's toolchains or env cannot be used: ") {
		t.Errorf("blocker %+v", b)
	}
}

// Unsandboxed, the caches are found but offered to no command: the host's
// caches would be written directly.
func TestEnvUnsandboxed(t *testing.T) {
	dir := t.TempDir()
	in := Input{Config: config.Config{Caches: &config.Caches{Npm: true}}, Getenv: getenvOf(map[string]string{"npm_config_cache": dir})}
	for _, unsandboxed := range []bool{false, true} {
		in.Unsandboxed = unsandboxed
		c, err := New(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		env := c.Env(egress.CommandVerify, []string{"HOME=/s/home"}, func(string) bool { return false })
		if has := slices.Contains(env, "npm_config_cache="+dir); has == unsandboxed {
			t.Errorf("unsandboxed %v: env %v", unsandboxed, env)
		}
		if got := c.Getenv()(pinNpm); got != dir {
			t.Errorf("pinned %s = %q", pinNpm, got)
		}
	}
}

// Warnings name an install with nothing to install from.
func TestWarnings(t *testing.T) {
	allowNpm, err := egress.ParseList([]string{warmcache.NpmRegistry + ":443"}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		caches *config.Caches
		setup  string
		verify string
		pol    egress.Policy
		want   []string // each warning's start
	}{
		{"npm ci in the setup", nil, "npm ci", "npm test", egress.Policy{}, []string{"the setup runs npm ci with no network to registry.npmjs.org"}},
		{"npm offered", &config.Caches{Npm: true}, "npm ci", "npm test", egress.Policy{}, nil},
		{"registry allowed", nil, "npm install", "true", egress.Policy{Setup: allowNpm}, nil},
		{"pip by path in the verification", nil, "", "$TMPDIR/venv/bin/pip install -r req.txt && pytest", egress.Policy{},
			[]string{"the verification runs pip install with no network to pypi.org"}},
		{"pip cache is not a wheelhouse", &config.Caches{Pip: true}, "", "pip3 install x", egress.Policy{}, []string{"the verification runs pip3 install"}},
		{"no install", nil, "", "go test ./...", egress.Policy{}, nil},
	}
	for _, tc := range cases {
		spec := task.Spec{Verification: task.Verification{Command: tc.verify}}
		if tc.setup != "" {
			spec.Setup = &task.Verification{Command: tc.setup}
		}
		got := Warnings(tc.caches, spec, tc.pol)
		if len(got) != len(tc.want) {
			t.Errorf("%s: warnings %q, want %d", tc.name, got, len(tc.want))
			continue
		}
		for i := range got {
			if !strings.HasPrefix(got[i], tc.want[i]) {
				t.Errorf("%s: warning %q, want it to start %q", tc.name, got[i], tc.want[i])
			}
		}
	}
}

// The kept layer's key changes with each of its inputs and only with them.
func TestKeptKey(t *testing.T) {
	g := warmcache.Go{BuildCache: "/host/go-build", ModCache: "/host/mod", Toolchain: "go1.22 /goroot linux/amd64"}
	base := KeptKey(g, "tree1", "go test ./...")
	if again := KeptKey(g, "tree1", "go test ./..."); again != base {
		t.Errorf("the same inputs give %s and %s", base, again)
	}
	other := g
	other.ModCache = "/elsewhere"
	if KeptKey(other, "tree1", "go test ./...") != base {
		t.Errorf("the module cache changed the key: the build cache's entries do not depend on it")
	}
	toolchain, cache := g, g
	toolchain.Toolchain, cache.BuildCache = "go1.23 /goroot linux/amd64", "/other/go-build"
	for name, k := range map[string]string{
		"tree": KeptKey(g, "tree2", "go test ./..."), "command": KeptKey(g, "tree1", "go test -race ./..."),
		"toolchain": KeptKey(toolchain, "tree1", "go test ./..."), "build cache": KeptKey(cache, "tree1", "go test ./..."),
	} {
		if k == base {
			t.Errorf("a different %s gives the same key %s", name, k)
		}
	}
}
