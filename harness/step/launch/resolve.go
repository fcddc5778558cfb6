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
// verification command that does not resolve inside the verification's view
// on the PATH env sets: such a run ends TEST_NOT_RUN (exit 127). It builds
// the view's lists as PlanView does, so the two agree on what is shown. A
// path relative to the checkout is the repository's own and is not checked.
// getenv is the harness's environment (HOME, PATH); tc is the
// verification's toolchains and found the ones the host has undeclared.
func Unresolved(cfg config.Config, getenv func(string) string, command string, tc toolenv.Set, env []string, found []config.Toolchain) []string {
	path := pathOf(env)
	lists := cfg.Lists(true)
	system := append(sandbox.DefaultSystem(), toolchainRoots(path)...)
	shown := append(append([]string{}, lists.ReadPaths...), tc.Read...)
	hide := append(append(sandbox.DefaultHide(), lists.HidePaths...), tc.Hide...)
	if home := getenv("HOME"); filepath.IsAbs(home) && filepath.Clean(home) != "/" {
		hide = append(hide, filepath.Clean(home))
	}
	visible := func(p string) bool {
		for _, q := range []string{p, realPath(p)} {
			if sandbox.WithinAny(q, shown) || sandbox.WithinAny(q, system) && !sandbox.WithinAny(q, hide) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, prog := range scan.Programs(command) {
		if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
			continue
		}
		if in := toolenv.Resolve(prog, path, visible); in != "" {
			// Found, but maybe not the one the user runs: pyenv's python3
			// on the host, the system's in the sandbox.
			if host := lookIn(prog, getenv("PATH")); host != "" && host != in && !strings.Contains(prog, "/") && !visible(host) {
				out = append(out, fmt.Sprintf("the verification's %s is %s inside the sandbox but %s on this host, which the sandbox does not show; declare its toolchain in the config's \"toolchains\" to use it", prog, in, host))
			}
			continue
		}
		msg := fmt.Sprintf("the verification runs %s, which does not resolve inside the sandbox's view (PATH %s): the run would end TEST_NOT_RUN (exit 127)", prog, path)
		if host := lookIn(prog, getenv("PATH")); host != "" && !strings.Contains(prog, "/") {
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
