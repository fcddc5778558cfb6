package launch

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/sandbox"
	"github.com/cto-harness/cto-harness/harness/scan"
	"github.com/cto-harness/cto-harness/harness/toolenv"
)

// Unresolved is the dry run's warning about each program of the
// verification that does not resolve inside the verification's view on the
// PATH env sets: such a run ends TEST_NOT_RUN (exit 127). progs are the
// command's own programs (scan.CommandPrograms) and
// those its make recipes start (scan.Result.Programs). A recipe's program
// is named only when this host has it: the scan follows every recipe a
// build might run, and a tool this host lacks would fail here as well. It
// builds the view's lists as PlanView does, so the two agree on what is
// shown. A path relative to the checkout is the repository's own and is
// not checked. getenv is the harness's environment (HOME, PATH); tc is the
// verification's toolchains and found the ones the host has undeclared.
func Unresolved(cfg config.Config, getenv func(string) string, progs []scan.Program, tc toolenv.Set, env []string, found []config.Toolchain) []string {
	path := pathOf(env)
	visible := viewCheck(cfg, getenv, path, tc)
	var out []string
	for _, p := range progs {
		prog := p.Name
		if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
			continue
		}
		runs, whose := "the verification runs "+prog, "the verification's "+prog
		if p.File != scan.CommandFile {
			at := fmt.Sprintf(" (from a make recipe at %s:%d)", p.File, p.Line)
			runs, whose = runs+at, whose+at
		}
		host := ""
		if !strings.Contains(prog, "/") {
			host = lookIn(prog, getenv("PATH"))
		}
		if in := toolenv.Resolve(prog, path, visible); in != "" {
			// Found, but maybe not the one the user runs: pyenv's python3
			// on the host, the system's in the sandbox.
			if host != "" && host != in && !visible(host) {
				out = append(out, fmt.Sprintf("%s is %s inside the sandbox but %s on this host, which the sandbox does not show; declare its toolchain in the config's \"toolchains\" to use it", whose, in, host))
			}
			continue
		}
		if host == "" && p.File != scan.CommandFile {
			continue
		}
		msg := fmt.Sprintf("%s, which does not resolve inside the sandbox's view (PATH %s): the run would end TEST_NOT_RUN (exit 127)", runs, path)
		if host != "" {
			msg += "; on this host it is " + host
		}
		for _, t := range found {
			for _, d := range t.Path {
				if lookIn(filepath.Base(prog), d) != "" {
					msg += fmt.Sprintf("; it is in the %s toolchain listed under toolchains_found: add that entry to the config's \"toolchains\"", t.Name)
				}
			}
		}
		out = append(out, msg)
	}
	return out
}

// viewCheck reports whether a host path is inside the verification's view:
// shown by the config or a toolchain, or a system directory not hidden.
func viewCheck(cfg config.Config, getenv func(string) string, path string, tc toolenv.Set) func(string) bool {
	lists := cfg.Lists(true)
	system := append(sandbox.DefaultSystem(), toolchainRoots(path)...)
	shown := append(append([]string{}, lists.ReadPaths...), tc.Read...)
	hide := append(append(sandbox.DefaultHide(), lists.HidePaths...), tc.Hide...)
	if home := getenv("HOME"); filepath.IsAbs(home) && filepath.Clean(home) != "/" {
		hide = append(hide, filepath.Clean(home))
	}
	return func(p string) bool {
		for _, q := range []string{p, realPath(p)} {
			if sandbox.WithinAny(q, shown) || sandbox.WithinAny(q, system) && !sandbox.WithinAny(q, hide) {
				return true
			}
		}
		return false
	}
}
