// Package config loads the harness configuration: which local repositories
// the user owns (the only valid stage 3 sources) and which roots are Target
// Repositories or external code that the harness must never touch.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cto-harness/cto-harness/schemas"
)

// EnvConfig names the environment variable that points at the config file.
const EnvConfig = "CTO_HARNESS_CONFIG"

// DefaultStageRecordMaxAge bounds how old a previous stage's validation record may be.
const DefaultStageRecordMaxAge = 24 * time.Hour

// ErrInvalid marks a config that cannot be used.
var ErrInvalid = errors.New("invalid config")

// Config is the harness configuration file.
type Config struct {
	OwnedSources      []string `json:"owned_sources"`
	TargetRoots       []string `json:"target_repository_roots"`
	ExternalRoots     []string `json:"external_roots,omitempty"`
	StageRecordMaxAge string   `json:"stage_record_max_age,omitempty"`
	CaseCommand       []string `json:"case_command,omitempty"`
	// AutoConfirm lets an adversary's generated tests run without asking
	// (run --auto-confirm); a batch worker's own config decides for its
	// trials.
	AutoConfirm bool `json:"auto_confirm,omitempty"`
	// Network grants egress to every run (and bounds what a task may ask).
	Network *NetworkAllow `json:"network,omitempty"`
	Signing Signing       `json:"signing,omitzero"`
	Agent   *Agent        `json:"agent,omitempty"`
	// Sandbox adds host paths to, or hides them from, the sandbox's
	// filesystem view (see docs/sandbox.md).
	Sandbox *Sandbox `json:"sandbox,omitempty"`
	// Toolchains are toolchains installed outside the sandbox's default
	// view (in a home directory: rustup, pyenv, nvm), shown read-only to
	// Case, the setup and the verification with the variables they need
	// (package toolenv).
	Toolchains []Toolchain `json:"toolchains,omitempty"`
	// Env are named variables passed to the commands they name.
	Env []EnvVar `json:"env,omitempty"`
	// Caches offers the host's dependency and build caches to Case, the
	// setup and the verification without letting them change the host's
	// copy (package warmcache).
	Caches *Caches `json:"caches,omitempty"`
	// Worker is a batch worker's own policy: what a trial request cannot
	// choose for it.
	Worker *Worker `json:"worker,omitempty"`
	// Snapshots bounds the snapshots of a commit's tree kept under the
	// runs directory between runs (package snapshot).
	Snapshots *Snapshots `json:"snapshots,omitempty"`
	// Path is where Load read the config from (absolute); the sandbox hides
	// it from Case.
	Path string `json:"-"`
}

// Sandbox lists what the filesystem view of Case adds and hides; the
// verification command uses Verification when set, these lists otherwise.
type Sandbox struct {
	ViewPaths
	Verification *ViewPaths `json:"verification,omitempty"`
}

// ViewPaths are absolute host paths bound read-only into the view, and
// absolute host paths kept out of it.
type ViewPaths struct {
	ReadPaths []string `json:"read_paths,omitempty"`
	HidePaths []string `json:"hide_paths,omitempty"`
}

// Lists returns the read and hide lists for Case (verification false) or
// the verification command.
func (c Config) Lists(verification bool) ViewPaths {
	if c.Sandbox == nil {
		return ViewPaths{}
	}
	if verification && c.Sandbox.Verification != nil {
		return *c.Sandbox.Verification
	}
	return c.Sandbox.ViewPaths
}

// Agent is the coding agent run as Case when the command line names none,
// and where its executable is when it is not the installed pinned release.
type Agent struct {
	Name      string   `json:"name"`
	Model     string   `json:"model,omitempty"`
	BaseURL   string   `json:"base_url,omitempty"`
	APIKeyEnv string   `json:"api_key_env,omitempty"`
	Command   []string `json:"command,omitempty"`
	// Prices estimate a run's cost when the agent reports none, per model
	// name; without a price the cost is "not reported", never 0.
	Prices map[string]Price `json:"prices,omitempty"`
	// StallSeconds is how long a model request may get nothing back (no
	// headers, or no byte of a stream) before the run stops with
	// MODEL_STALLED; 0 is the model meter's default (15 s). A provider slow
	// to its first byte needs more.
	StallSeconds int `json:"stall_seconds,omitempty"`
}

// Price is a model's price in US dollars per million tokens, one rate per
// part of the normalised usage (see docs/agents.md).
type Price struct {
	Input      float64 `json:"input_per_mtok"`
	CacheRead  float64 `json:"cache_read_per_mtok"`
	CacheWrite float64 `json:"cache_write_per_mtok"`
	Output     float64 `json:"output_per_mtok"`
}

// NetworkAllow are the egress allowlists, HOST:PORT each (see docs/sandbox.md).
type NetworkAllow struct {
	CaseAllow   []string `json:"case_allow,omitempty"`
	VerifyAllow []string `json:"verify_allow,omitempty"`
	SetupAllow  []string `json:"setup_allow,omitempty"`
}

// Worker is what a batch worker decides itself, whatever a request says.
type Worker struct {
	Agents []WorkerAgent `json:"agents,omitempty"`
	// Slots is how many trials the worker runs at once (cto-harness worker
	// --slots overrides it); 0 is the worker's default, bounded by memory.
	// Trials that wait on a hosted model are bounded by its quota, not by
	// the cores.
	Slots int `json:"slots,omitempty"`
}

// WorkerAgent is the endpoint and key variable a worker gives one kind of
// coding agent: a request never names the variable that becomes an
// agent's key, nor where the key is sent.
type WorkerAgent struct {
	Kind      string `json:"kind"`
	BaseURL   string `json:"base_url"`
	APIKeyEnv string `json:"api_key_env"`
}

// Toolchain is one toolchain outside the default view: its directories
// (bound read-only), the PATH entries in them, and its variables.
type Toolchain struct {
	Name  string            `json:"name"`
	Paths []string          `json:"paths"`
	Path  []string          `json:"path,omitempty"`
	Env   map[string]string `json:"env,omitempty"`
}

// Snapshots is the snapshots key: how much disk `runs prune` leaves them.
type Snapshots struct {
	// MaxBytes is what the snapshots may take after a prune, which
	// removes the least recently used beyond it (0: prune removes every
	// one no run holds). Unset is snapshot.DefaultMaxBytes (2 GiB).
	MaxBytes *int64 `json:"max_bytes,omitempty"`
}

// SnapshotMaxBytes is the snapshots' cap the config sets, or def.
func (c Config) SnapshotMaxBytes(def int64) int64 {
	if c.Snapshots == nil || c.Snapshots.MaxBytes == nil {
		return def
	}
	return *c.Snapshots.MaxBytes
}

// Caches names the host caches to offer.
type Caches struct {
	// Go serves the host's module cache as an offline module proxy and
	// shows its build cache through a per-run overlay.
	Go bool `json:"go,omitempty"`
	// Npm shows the host's npm cache through a per-run overlay; npm
	// prefers it, and uses nothing else when the registry is not allowed.
	Npm bool `json:"npm,omitempty"`
	// Pip shows the host's pip cache through a per-run overlay.
	Pip bool `json:"pip,omitempty"`
	// PipWheelhouse is a directory of wheels pip may install from
	// (PIP_FIND_LINKS), shown the same way; the one pip source that works
	// offline. Setting it offers the pip cache too.
	PipWheelhouse string `json:"pip_wheelhouse,omitempty"`
	// Cargo shows the host's cargo registry and git checkouts inside each
	// command's own CARGO_HOME through per-run overlays.
	Cargo bool `json:"cargo,omitempty"`
}

// EnvVar is one variable for the commands in For ("case", "setup",
// "verification"). Without Value it is copied from the harness's own
// environment, and a run where it is unset is refused.
type EnvVar struct {
	Name  string   `json:"name"`
	Value *string  `json:"value,omitempty"`
	For   []string `json:"for"`
}

// Signing names the evidence signing key and the public keys trusted when
// verifying (several, so keys can be rotated). See docs/evidence.md.
type Signing struct {
	KeyFile     string   `json:"key_file,omitempty"`
	TrustedKeys []string `json:"trusted_keys,omitempty"`
	// WorkerKeys are the batch workers' public keys: a coordinator counts a
	// worker's run only when one of them signed it. They are kept apart from
	// TrustedKeys, which vouch for this machine's own runs and stage records:
	// a worker key must not let a worker's run pass as one made here. They
	// live here and not in a batch spec because trust is the machine
	// operator's decision, and a spec's digest is its batch's id (rotating a
	// worker key must not make a new batch).
	WorkerKeys []string `json:"worker_keys,omitempty"`
	// CoordinatorKeys are the batch coordinators' public keys: a worker
	// runs a trial request only when one of them signed it.
	CoordinatorKeys []string `json:"coordinator_keys,omitempty"`
	// Disabled is the one way to run unsigned: evidence is signed by
	// default (a machine key is created on first use), so turning that off
	// is an explicit, explained choice that health reports.
	Disabled       bool   `json:"disabled,omitempty"`
	DisabledReason string `json:"disabled_reason,omitempty"`
}

// MaxAge returns the configured stage-record max age, or the default.
func (c Config) MaxAge() time.Duration {
	if c.StageRecordMaxAge == "" {
		return DefaultStageRecordMaxAge
	}
	d, _ := time.ParseDuration(c.StageRecordMaxAge) // checked by Parse
	return d
}

// Load reads and validates a config file. validate checks the bytes against
// the config schema.
func Load(path string, validate func([]byte) error) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("%w: read %s: %v", ErrInvalid, path, err)
	}
	c, err := Parse(data, path, validate)
	if err == nil {
		if abs, aerr := filepath.Abs(path); aerr == nil {
			c.Path = abs
		}
	}
	return c, err
}

// Parse decodes and validates config bytes; origin names them in errors.
func Parse(data []byte, origin string, validate func([]byte) error) (Config, error) {
	if err := validate(data); err != nil {
		var syn *schemas.SyntaxError
		if errors.As(err, &syn) {
			return Config{}, fmt.Errorf("%w: %s; fix the JSON there", ErrInvalid, syn.In(origin))
		}
		return Config{}, fmt.Errorf("%w: %s does not match the config schema: %v", ErrInvalid, origin, err)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Config{}, fmt.Errorf("%w: %s: %v", ErrInvalid, origin, err)
	}
	lists := [][]string{c.OwnedSources, c.TargetRoots, c.ExternalRoots, c.signingPaths()}
	if c.Sandbox != nil {
		lists = append(lists, c.Sandbox.ReadPaths, c.Sandbox.HidePaths)
		if v := c.Sandbox.Verification; v != nil {
			lists = append(lists, v.ReadPaths, v.HidePaths)
		}
	}
	for _, tc := range c.Toolchains {
		lists = append(lists, tc.Paths, tc.Path)
	}
	for _, list := range lists {
		for _, p := range list {
			if !filepath.IsAbs(p) {
				return Config{}, fmt.Errorf("%w: %s: path %q must be absolute", ErrInvalid, origin, p)
			}
		}
	}
	if c.Signing.Disabled && (c.Signing.DisabledReason == "" || c.Signing.KeyFile != "") {
		return Config{}, fmt.Errorf("%w: %s: signing.disabled needs a signing.disabled_reason and no signing.key_file", ErrInvalid, origin)
	}
	if c.StageRecordMaxAge != "" {
		d, err := time.ParseDuration(c.StageRecordMaxAge)
		if err != nil || d <= 0 {
			return Config{}, fmt.Errorf("%w: %s: stage_record_max_age %q must be a positive Go duration such as \"24h\"", ErrInvalid, origin, c.StageRecordMaxAge)
		}
	}
	return c, nil
}

func (c Config) signingPaths() []string {
	out := append(append(append([]string{}, c.Signing.TrustedKeys...), c.Signing.WorkerKeys...), c.Signing.CoordinatorKeys...)
	if c.Signing.KeyFile != "" {
		out = append(out, c.Signing.KeyFile)
	}
	return out
}
