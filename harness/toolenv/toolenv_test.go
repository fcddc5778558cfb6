package toolenv_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

func TestFor(t *testing.T) {
	dir := t.TempDir()
	cargo := filepath.Join(dir, ".cargo")
	for _, d := range []string{filepath.Join(cargo, "bin"), filepath.Join(dir, ".rustup")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cargo, "credentials.toml"), []byte("token"), 0o600); err != nil {
		t.Fatal(err)
	}
	rust := config.Toolchain{Name: "rust", Paths: []string{cargo, filepath.Join(dir, ".rustup")}, Path: []string{filepath.Join(cargo, "bin")},
		Env: map[string]string{"CARGO_HOME": cargo}}
	v := "1"
	getenv := func(k string) string {
		if k == "FROM_HOST" {
			return "host value"
		}
		return ""
	}
	c := config.Config{Toolchains: []config.Toolchain{rust}, Env: []config.EnvVar{
		{Name: "CI", Value: &v, For: []string{toolenv.ForVerification, toolenv.ForSetup}},
		{Name: "FROM_HOST", For: []string{toolenv.ForCase}}}}
	s, err := toolenv.For(c, toolenv.ForVerification, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.Env, []string{"CARGO_HOME=" + cargo, "CI=1"}) || len(s.Read) != 2 || !slices.Equal(s.Hide, []string{filepath.Join(cargo, "credentials.toml")}) {
		t.Fatalf("verification set %+v", s)
	}
	env := s.Apply([]string{"HOME=/scratch/home", "PATH=/usr/bin:/bin"})
	if !slices.Contains(env, "PATH="+filepath.Join(cargo, "bin")+":/usr/bin:/bin") || !slices.Contains(env, "HOME=/scratch/home") {
		t.Fatalf("applied env %v", env)
	}
	if s, err := toolenv.For(c, toolenv.ForCase, getenv); err != nil || !slices.Contains(s.Env, "FROM_HOST=host value") || slices.Contains(s.Env, "CI=1") {
		t.Fatalf("case set %+v, %v", s, err)
	}
	for name, bad := range map[string]config.Config{
		"host variable unset": {Env: []config.EnvVar{{Name: "NOPE", For: []string{toolenv.ForCase}}}},
		"reserved name":       {Env: []config.EnvVar{{Name: "GOFLAGS", Value: &v, For: []string{toolenv.ForCase}}}},
		"harness prefix":      {Env: []config.EnvVar{{Name: "CTO_HARNESS_CONFIG", Value: &v, For: []string{toolenv.ForCase}}}},
		"unknown command":     {Env: []config.EnvVar{{Name: "X", Value: &v, For: []string{"tests"}}}},
		"PATH outside":        {Toolchains: []config.Toolchain{{Name: "x", Paths: []string{cargo}, Path: []string{"/usr/local/bin"}}}},
		"missing path":        {Toolchains: []config.Toolchain{{Name: "x", Paths: []string{filepath.Join(dir, "gone")}}}},
		"reserved in toolchain": {Toolchains: []config.Toolchain{{Name: "x", Paths: []string{cargo},
			Env: map[string]string{"HOME": cargo}}}},
	} {
		if _, err := toolenv.For(bad, toolenv.ForCase, getenv); !errors.Is(err, toolenv.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestResolveAndDetect(t *testing.T) {
	home := t.TempDir()
	bin := filepath.Join(home, ".cargo", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".rustup"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "cargo"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path := bin + ":/usr/bin:/bin"
	all := func(string) bool { return true }
	noHome := func(p string) bool { return !strings.HasPrefix(p, home) }
	if got := toolenv.Resolve("cargo", path, all); got != filepath.Join(bin, "cargo") {
		t.Errorf("cargo resolves to %q", got)
	}
	if got := toolenv.Resolve("cargo", path, noHome); got != "" {
		t.Errorf("cargo resolves to %q though its directory is not in the view", got)
	}
	if got := toolenv.Resolve("sh", path, noHome); got == "" {
		t.Error("sh does not resolve")
	}
	found := toolenv.Detect(home, nil)
	if len(found) != 1 || found[0].Name != "rust" || found[0].Env["RUSTUP_HOME"] != filepath.Join(home, ".rustup") || found[0].Paths[0] != bin {
		t.Fatalf("detected %+v", found)
	}
	if again := toolenv.Detect(home, found); len(again) != 0 {
		t.Errorf("a declared toolchain is offered again: %+v", again)
	}
}
