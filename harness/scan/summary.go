package scan

import (
	"fmt"
	"strings"
)

// summaryNamed is how many blocking findings a summary names; the record
// holds them all.
const summaryNamed = 3

// Summary is the reason a blocked scan gives: how many findings there are
// and how many block, the first few blocking ones with their file, line and
// text, and where the rest are. A caller adds how to run the command anyway.
func Summary(fs []Finding) string {
	var block []Finding
	for _, f := range fs {
		if f.Severity == High || f.Severity == Critical {
			block = append(block, f)
		}
	}
	if len(block) == 0 {
		return fmt.Sprintf("%s, none blocking", plural(len(fs), "finding"))
	}
	var parts []string
	for _, f := range block[:min(len(block), summaryNamed)] {
		parts = append(parts, fmt.Sprintf("%s:%d %s (%s) %q", f.File, f.Line, f.Pattern, f.Severity, f.Command))
	}
	more := ""
	if n := len(block) - summaryNamed; n > 0 {
		more = fmt.Sprintf("; and %d more", n)
	}
	return fmt.Sprintf("dangerous operations found: %s, %d blocking: %s%s (every finding is in the record's findings; fix or remove those lines)",
		plural(len(fs), "finding"), len(block), strings.Join(parts, "; "), more)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
