package agentcase

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/runsink"
)

// Redactor hides Case's agent's key in what the run's sink writes (events
// as they are emitted, blocker messages): the event log is hash-chained
// and cannot be redacted afterwards.
type Redactor struct{ red *agent.Redactor }

var _ runsink.Redactor = Redactor{}

// Redactor is the sink's redactor for this agent's key.
func (a *Agent) Redactor() Redactor { return Redactor{a.red} }

// Data redacts an event's data when it holds the key.
func (x Redactor) Data(data any) any {
	if x.red == nil {
		return data
	}
	raw, err := json.Marshal(data)
	if err != nil || !x.red.Contains(raw) {
		return data
	}
	return json.RawMessage(x.red.Bytes(raw))
}

// String redacts a message.
func (x Redactor) String(s string) string { return x.red.String(s) }

// Secret is one key the evidence must not hold: its variable and its
// redactor (Case's agent's, the adversary agent's).
type Secret struct {
	KeyVar string
	Red    *agent.Redactor
}

// Secret is Case's agent's key.
func (a *Agent) Secret() Secret { return Secret{KeyVar: a.in.Options.APIKeyEnv, Red: a.red} }

// Sweep redacts the keys from every evidence file written so far (or the
// named ones), before any digest is computed. The hash-chained event log
// cannot be rewritten (events are redacted as they are written); if it
// holds a key anyway the run is blocked.
func Sweep(s *runsink.Sink, secrets []Secret, names ...string) {
	if len(secrets) == 0 {
		return
	}
	if len(names) == 0 {
		all, err := evidence.ListArtifacts(s.Dir.Root())
		if err != nil {
			s.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
				Message: "the evidence could not be listed to redact the API key: " + err.Error()})
			return
		}
		names = all
	}
	for _, sec := range secrets {
		for _, n := range names {
			p := s.Dir.Path(n)
			if n == evidence.EventsFile {
				if data, err := os.ReadFile(p); err == nil && sec.Red.Contains(data) {
					s.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
						Message: "the event log holds the value of " + sec.KeyVar + " and cannot be rewritten without breaking its hash chain"})
				}
				continue
			}
			if _, err := sec.Red.File(p); err != nil {
				s.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
					Message: fmt.Sprintf("%s could not be redacted: %v", n, err)})
			}
		}
	}
}

// RedactReport redacts the report itself (inline output, messages).
func RedactReport(rep *ctoharness.Report, secrets []Secret) {
	for _, sec := range secrets {
		raw, err := json.Marshal(rep)
		if err != nil || !sec.Red.Contains(raw) {
			continue
		}
		var clean ctoharness.Report
		if err := json.Unmarshal(sec.Red.Bytes(raw), &clean); err == nil {
			*rep = clean
		}
	}
}

// Scrub removes the key from every regular file under root, a kept
// workspace (session files hold it in plain text whenever a tool printed
// it). Every file is opened beneath root without following a link, and
// scrubbed in bounded memory. Nil-safe.
func (a *Agent) Scrub(root string) {
	if a == nil || a.red == nil {
		return
	}
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil
		}
		if rel, err := filepath.Rel(root, p); err == nil {
			_, _ = a.red.ScrubBeneath(root, filepath.ToSlash(rel))
		}
		return nil
	})
}
