package verify

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A program that is not in the sandbox is not a failing test: the tests
// did not run, and a rerun would not find it either. The shell says so with
// exit status 127; make says so for a recipe with "Error 127" and exits 2,
// which is how a build that calls a tool from the user's home (git's
// Makefile runs cargo) fails inside the sandbox.

// ExitNotFound is the shell's exit status for a command it cannot find
// (POSIX: 127).
const ExitNotFound = 127

// toolchainHint is what a missing program's reason ends with.
const toolchainHint = "the verification sees only the sandbox's view and PATH: declare the toolchain in the config's \"toolchains\" (see docs/real-repositories.md) and check with --dry-run"

var (
	// makeErrorLine is make's line for a recipe that failed:
	// "make[1]: *** [Makefile:12: all] Error 127".
	makeErrorLine = regexp.MustCompile(`^(?:\S*/)?g?make(?:\[(\d+)\])?: \*\*\* \[.*\] Error (\d+)$`)
	// notFoundLines name the program: dash ("/bin/sh: 1: cargo: not
	// found"), bash ("sh: line 1: cargo: command not found") and make
	// running a recipe without a shell ("make: cargo: No such file or
	// directory", older makes "Command not found").
	notFoundLines = []*regexp.Regexp{
		regexp.MustCompile(`^\S+: \d+: (\S+): not found$`),
		regexp.MustCompile(`^\S+: line \d+: (\S+): command not found$`),
		regexp.MustCompile(`^(?:\S*/)?g?make(?:\[\d+\])?: (\S+): (?:No such file or directory|Command not found)$`),
	}
)

// missingProgram is the reason of a verification that failed because a
// program it starts is not in the sandbox, or "" when stderr does not show
// that: exit status 127 from the shell, or make's recipes failing only with
// Error 127 (and the Error 2 of the makes above them) after a "not found"
// line that names the program.
func missingProgram(exit int, stderr string) string {
	if exit == 0 {
		return ""
	}
	if exit == ExitNotFound {
		return notFoundReason(stderr)
	}
	return recipeNotFound(stderr)
}

// notFoundReason is the reason of a verification that exited 127: the
// shell's own "not found" line when stderr has one, and where to look.
func notFoundReason(stderr string) string {
	reason := "program not found in the sandbox (exit status 127)"
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if strings.Contains(l, "not found") || strings.Contains(l, "No such file") {
			reason += ": " + clip(l)
			break
		}
	}
	return reason + "; " + toolchainHint
}

// recipeNotFound is missingProgram's make case.
func recipeNotFound(stderr string) string {
	var names []string
	var first, failed string // the first not-found line, and make's line for it
	deepest, outerOK := -1, true
	var outer []int // levels of the makes that failed with another status
	for _, l := range strings.Split(stderr, "\n") {
		l = strings.TrimSpace(l)
		for _, re := range notFoundLines {
			if m := re.FindStringSubmatch(l); m != nil {
				if first == "" {
					first = l
				}
				if !slices.Contains(names, m[1]) && len(names) < 5 {
					names = append(names, m[1])
				}
			}
		}
		m := makeErrorLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		level, _ := strconv.Atoi(m[1]) // "make:" is the outermost, level 0
		switch m[2] {
		case strconv.Itoa(ExitNotFound):
			deepest = max(deepest, level)
			if failed == "" {
				failed = l
			}
		case "2":
			outer = append(outer, level) // a make above one that failed
		default:
			outerOK = false // a recipe failed for another reason
		}
	}
	for _, lv := range outer {
		outerOK = outerOK && lv < deepest
	}
	if failed == "" || len(names) == 0 || !outerOK {
		return ""
	}
	return fmt.Sprintf("a program a make recipe runs is not in the sandbox: %s (%q, then %q); %s",
		strings.Join(names, ", "), clip(first), clip(failed), toolchainHint)
}
