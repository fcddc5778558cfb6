package validators

import (
	"bytes"
	"regexp"

	ctoharness "github.com/cto-harness/cto-harness"
)

// redactionMarker is what the harness writes in place of a secret's value
// in the evidence of a coding-agent run ([REDACTED:VAR]).
var redactionMarker = regexp.MustCompile(`\[REDACTED:[A-Za-z_][A-Za-z0-9_]*\]`)

// redactedFrom reports whether stored is derived with its secrets redacted:
// the run had an agent with secrets, and stored equals derived except that
// each marker stands for one non-empty stretch of a single line. A patch
// re-derived from a fixture the agent wrote its key into holds the key;
// the evidence holds the marker.
func redactedFrom(rep *ctoharness.Report, stored, derived []byte) bool {
	if rep.Agent == nil || len(rep.Agent.SecretEnv) == 0 || !redactionMarker.Match(stored) {
		return false
	}
	var pat bytes.Buffer
	pat.WriteString(`\A`)
	last := 0
	for _, m := range redactionMarker.FindAllIndex(stored, -1) {
		pat.WriteString(regexp.QuoteMeta(string(stored[last:m[0]])))
		pat.WriteString(`[^\n]+?`)
		last = m[1]
	}
	pat.WriteString(regexp.QuoteMeta(string(stored[last:])))
	pat.WriteString(`\z`)
	re, err := regexp.Compile(pat.String())
	return err == nil && re.Match(derived)
}
