package agentcase

import (
	"context"
	"fmt"
	"sort"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/config"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/harness/modelmeter"
)

// End closes the agent's account once Case has exited: what its stream
// said into rec, the meter stopped and its usage (the requests kept as
// evidence), and the run's model blockers for the Case step's judgement:
// the provider the meter judged failed (stopped) and the model error the
// stream reported (failed); each nil when there was none.
func (a *Agent) End(ctx context.Context, rec *ctoharness.AgentRecord) (stopped, failed *ctoharness.Blocker) {
	if err := a.record(rec); err != nil {
		a.s.BlockWrite(err, ctoharness.StepCase)
	}
	a.Close()
	a.usage(ctx, rec)
	return a.stopBlocker(), a.errorBlocker()
}

// Close stops the model meter (idempotent, and nil-safe): the agent is
// gone, or never started.
func (a *Agent) Close() {
	if a != nil && a.meter != nil {
		_ = a.meter.Close()
	}
}

// usage is the meter's account of the run: every request in order,
// summed, with the cost the agent reported, or one estimated from the
// config's prices, or none.
func (a *Agent) usage(ctx context.Context, rec *ctoharness.AgentRecord) {
	reported := 0.0
	if rec.Finished {
		reported = rec.ReportedCostUSD
	}
	u, lines := modelmeter.Account(a.meter.Requests(), reported, Price(a.in.Settings, rec.Model))
	rec.Usage = u
	if err := a.s.Dir.WriteFile(ctx, ModelRequests, a.red.Bytes(lines)); err != nil {
		a.s.BlockWrite(err, ctoharness.StepCase)
	}
}

// Price is the config's price of model, nil when it has none.
func Price(c *config.Agent, model string) *config.Price {
	if c == nil {
		return nil
	}
	if p, ok := c.Prices[model]; ok {
		return &p
	}
	return nil
}

// record closes the stream file and copies what the stream said into the report.
func (a *Agent) record(rec *ctoharness.AgentRecord) error {
	err := a.stream.Close()
	res := a.tr.Result()
	if res.Version != "" {
		rec.Version = res.Version
	}
	if res.Model != "" {
		rec.Model = res.Model
	}
	rec.NativeLines = a.lines
	rec.UnknownLines = res.Unknown + res.Malformed
	rec.Finished = res.Finished
	rec.ResultError = a.red.String(res.ErrorMessage)
	rec.Turns = res.Turns
	rec.InputTokens, rec.OutputTokens, rec.CachedTokens = res.InputTokens, res.OutputTokens, res.CachedTokens
	rec.APITimeMs = res.APIMs
	rec.ReportedCostUSD = res.CostUSD
	rec.Commands = res.Commands
	rec.FileWrites = res.FileWrites
	rec.AttemptedEscapes = append([]string{}, res.Escapes...)
	return err
}

// stopCodes name the meter's verdicts; an unknown one is an API error.
var stopCodes = map[string]ctoharness.BlockerCode{modelmeter.StopAPIError: ctoharness.BlockModelAPIError,
	modelmeter.StopRateLimited: ctoharness.BlockModelRateLimited, modelmeter.StopStalled: ctoharness.BlockModelStalled}

// stopBlocker is the blocker of a run whose model provider the meter
// judged failed (Case was stopped for it), with the code that names the
// failure; nil when the provider did not fail.
func (a *Agent) stopBlocker() *ctoharness.Blocker {
	st := a.model.verdict()
	if st == nil {
		return nil
	}
	code := stopCodes[st.Reason]
	if code == "" {
		code = ctoharness.BlockModelAPIError
	}
	return &ctoharness.Blocker{Code: code, Step: ctoharness.StepCase,
		Message: fmt.Sprintf("%s was stopped: %s at %s; the per-request record is in report.json (agent.usage) and %s",
			a.spec.Name, a.red.String(st.Message), a.in.Options.BaseURL, ModelRequests)}
}

// errorBlocker is the blocker of a run whose stream reported a model or API
// error, whatever the exit status (agents differ: some exit 0, one exits
// 144); nil when it reported none.
func (a *Agent) errorBlocker() *ctoharness.Blocker {
	res := a.tr.Result()
	if !res.IsError {
		return nil
	}
	return &ctoharness.Blocker{Code: ctoharness.BlockAgentModelError, Step: ctoharness.StepCase,
		Message: fmt.Sprintf("%s reported a model or API error: %s; see %s", a.spec.Name, a.red.String(res.ErrorMessage), Stream)}
}

// AfterCollect judges what the agent left in the fixture once the result
// is collected (the report's changed files): the key written into it, an
// attempted write outside it, or no change at all. Nil-safe; an agent
// whose stream was never read is not judged.
func (a *Agent) AfterCollect(fixture string) {
	if a == nil || a.tr == nil {
		return
	}
	s := a.s
	paths := map[string]bool{}
	for _, p := range a.changed {
		paths[p] = true
	}
	for _, c := range s.Report.ChangedFiles {
		if name, ok := c.Name(); ok {
			paths[name] = true
		}
	}
	list := make([]string, 0, len(paths))
	for p := range paths {
		list = append(list, p)
	}
	sort.Strings(list)
	holding, err := a.red.Holding(fixture, list)
	if err != nil {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepCollect,
			Message: "the changed files could not be checked for the API key: " + err.Error()})
	}
	if len(holding) > 0 {
		a.keyInResult = true
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepCollect,
			Message: fmt.Sprintf("the agent wrote the value of %s into the fixture (%s); it is redacted from every evidence file and %s, and the harness's store of the result (%s), whose objects hold it, is removed before the report is written, so the change cannot be re-derived: rotate the key",
				a.in.Options.APIKeyEnv, strings.Join(holding, ", "), workFate(a.in.KeepWork, s.Report.RuntimeWorkspaceRoot), s.Dir.Path(evidence.StoreDir))})
	}
	if esc := a.tr.Result().Escapes; len(esc) > 0 {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect,
			Message: "the agent tried to write outside the fixture: " + strings.Join(esc, ", ")})
	}
	if s.OK() && len(s.Report.ChangedFiles) == 0 {
		s.Block(ctoharness.Blocker{Code: ctoharness.BlockAgentNoChange, Step: ctoharness.StepCollect,
			Message: fmt.Sprintf("%s finished without changing anything in the fixture; see %s for what it did", a.spec.Name, Stream)})
	}
}

// workFate says what becomes of the workspace, for messages.
func workFate(keep bool, root string) string {
	if keep {
		return "the kept workspace " + root + " is scrubbed of it"
	}
	return "the workspace " + root + " is removed at the end of the run"
}

// DropKeyedStore removes the run's store (with remove, which copes with
// read-only trees) when the agent wrote its key into the result: git
// objects are compressed and cannot be redacted, and a blocked run
// validates without its store (its patch.diff, redacted, stays). A store
// that cannot be removed is said in the blocker. Nil-safe.
func (a *Agent) DropKeyedStore(remove func(string) error) {
	if a == nil || !a.keyInResult {
		return
	}
	store := a.s.Dir.Path(evidence.StoreDir)
	a.s.Trace.Trace(ctoharness.TraceRemove, store)
	if err := remove(store); err != nil {
		a.s.Block(ctoharness.Blocker{Code: ctoharness.BlockSecretInEvidence, Step: ctoharness.StepReport,
			Message: fmt.Sprintf("the store %s holds the agent's key and could not be removed (%v): delete it, and rotate the key", store, err)})
	}
}
