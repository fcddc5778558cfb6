package agent

import (
	"fmt"
	"strings"
)

// Prompt is the text an agent is given: the task, the paths it may change
// and the rules. It never names the source repository (the contract does
// not either).
func Prompt(task string, allowed, forbidden []string) string {
	var b strings.Builder
	b.WriteString(strings.TrimSpace(task))
	b.WriteString("\n\nYou are working in a copy of a git repository (the current directory).")
	fmt.Fprintf(&b, "\nYou may change only these paths (globs relative to the current directory): %s.", strings.Join(allowed, ", "))
	b.WriteString("\nRules:")
	b.WriteString("\n- Do not commit; do not touch .git.")
	b.WriteString("\n- Do not write outside the current directory.")
	for _, f := range forbidden {
		b.WriteString("\n- Forbidden: " + strings.TrimSpace(f) + ".")
	}
	b.WriteString("\nWhen the change is made, stop and say what you did in one sentence.")
	return b.String()
}
