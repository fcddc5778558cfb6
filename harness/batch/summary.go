package batch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// Summary file names in the batch directory.
const (
	SummaryJSON      = "batch.json"
	SummaryHTML      = "batch.html"
	SummarySignature = "batch.dsse.json"
)

// BatchPredicateType is the predicate type of batch.dsse.json.
const BatchPredicateType = "https://cto-harness.invalid/attestation/batch/v1"

// SummaryVersion is batch.json's schema_version.
const SummaryVersion = "1"

// Summary is batch.json (schemas/batch.schema.json).
type Summary struct {
	SchemaVersion string       `json:"schema_version"`
	BatchID       string       `json:"batch_id"`
	Name          string       `json:"name"`
	SpecDigest    string       `json:"spec_digest"`
	GeneratedAt   time.Time    `json:"generated_at"`
	MaxAttempts   int          `json:"max_attempts"`
	Trials        int          `json:"trials"`
	Finished      int          `json:"finished"`
	Complete      bool         `json:"complete"`
	Cells         []Cell       `json:"cells"`
	Agents        []AgentTotal `json:"agents"`
	TrialList     []TrialRow   `json:"trial_list"`
	// Tests are the listed tests per task and agent (TestCell): which
	// fail-to-pass tests the agents made pass, and which pass-to-pass
	// tests they broke. Absent in summaries written before it was kept,
	// and when no task lists tests.
	Tests []TestCell `json:"tests,omitempty"`
	// SigningKeyID is the key batch.dsse.json is signed with, recorded
	// before signing so the page and a reader of batch.json see it (the
	// signature covers it); absent when the summary is unsigned, and in
	// summaries written before it was kept.
	SigningKeyID string `json:"signing_key_id,omitempty"`
}

// Totals are the sums every row of a summary carries.
type Totals struct {
	Trials   int `json:"trials"`   // planned
	Finished int `json:"finished"` // final
	// Scored are the finished trials whose outcome is about the agent
	// (Outcome.Scored); the rest of Finished are unscored (infra_failed,
	// model_failed) and stay out of every rate.
	Scored   int           `json:"scored"`
	Passes   int           `json:"passes"`
	Attempts int           `json:"attempts"`
	Outcomes OutcomeCounts `json:"outcomes"`
	// Flaky are the finished trials whose verification failed and then
	// passed on a rerun (TEST_FLAKE): a flaky task, not a failing agent,
	// when they gather on one task. AdversaryRejected are those the task's
	// adversary failed (ADVERSARIAL_TESTS_FAILED) after its own tests passed.
	Flaky             int   `json:"flaky,omitempty"`
	AdversaryRejected int   `json:"adversary_rejected,omitempty"`
	InputTokens       int64 `json:"input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
	// CostUSD is nil when some attempt's cost is unknown (no reported cost
	// and no price in the spec): a sum would understate it.
	CostUSD    *float64 `json:"cost_usd"`
	CostBasis  string   `json:"cost_basis"`  // reported, estimated, none, mixed or unknown
	DurationMs int64    `json:"duration_ms"` // the runs' own time
	QueueMs    int64    `json:"queue_ms"`    // waiting for a worker, and transfer (NATS)
}

// OutcomeCounts counts finished trials by outcome.
type OutcomeCounts struct {
	Pass          int `json:"pass"`
	AgentFailed   int `json:"agent_failed"`
	ModelFailed   int `json:"model_failed"`
	InfraFailed   int `json:"infra_failed"`
	PolicyBlocked int `json:"policy_blocked"`
	TaskInvalid   int `json:"task_invalid"`
}

func (o *OutcomeCounts) add(x Outcome) {
	switch x {
	case OutcomePass:
		o.Pass++
	case OutcomeAgentFailed:
		o.AgentFailed++
	case OutcomeModelFailed:
		o.ModelFailed++
	case OutcomeInfraFailed:
		o.InfraFailed++
	case OutcomePolicyBlocked:
		o.PolicyBlocked++
	case OutcomeTaskInvalid:
		o.TaskInvalid++
	}
}

// Cell is one agent on one task, over every source and repeat.
type Cell struct {
	Agent string `json:"agent"`
	Task  string `json:"task"`
	Totals
	// PassAtK (some of k attempts pass) and PassHatK (all k pass) for
	// k = 1 .. the cell's planned trials, over its scored trials; Value is
	// nil where fewer than k are scored ("not enough trials").
	PassAtK  []PassAtK `json:"pass_at_k"`
	PassHatK []PassAtK `json:"pass_hat_k"`
}

// PassAtK is one unbiased estimate over n scored trials with c passes:
// pass@k = 1 - C(n-c, k) / C(n, k), pass^k = C(c, k) / C(n, k).
type PassAtK struct {
	K     int      `json:"k"`
	Value *float64 `json:"value"`
}

// AgentTotal is one agent over every task.
type AgentTotal struct {
	Agent string `json:"agent"`
	Totals
	PassRate float64 `json:"pass_rate"` // passes / scored; 0 when none is scored
	// Failures count the agent's attempts that did not pass by outcome
	// class and blocker code: why it failed, retried attempts included.
	// Absent when every attempt passed, and in summaries written before
	// it was kept.
	Failures []FailureCount `json:"failures,omitempty"`
}

// FailureCount is how many attempts of one outcome class had one blocker
// code; an attempt with several blockers counts under each.
type FailureCount struct {
	Outcome string `json:"outcome"`
	// Code is the blocker code; "" for an attempt with none (a run that
	// could not be made, or whose evidence did not validate: the trial's
	// note says why).
	Code     string `json:"code"`
	Attempts int    `json:"attempts"`
}

// TrialRow is one trial in batch.json: where it stands and where its evidence is.
type TrialRow struct {
	TrialID    string `json:"trial_id"`
	Source     string `json:"source"`
	SourceHead string `json:"source_head"`
	Task       string `json:"task"`
	Agent      string `json:"agent"`
	Repeat     int    `json:"repeat"`
	// AttemptID is the last attempt's (the one the row's run is of); ""
	// when the trial has none.
	AttemptID string `json:"attempt_id"`
	// Outcome is the last attempt's, or "pending" when the trial has none.
	Outcome    string `json:"outcome"`
	Final      bool   `json:"final"`
	Attempts   int    `json:"attempts"`
	Refused    int    `json:"refused"`
	RunID      string `json:"run_id"`
	RunDir     string `json:"run_dir"`
	ReportHTML string `json:"report_html"` // relative to the batch directory
	Worker     string `json:"worker"`
	KeyID      string `json:"key_id"`
	DurationMs int64  `json:"duration_ms"`
	QueueMs    int64  `json:"queue_ms"`
	// RequestNonce is the nonce of the request the row's run answers; its
	// report's trial binding must carry it.
	RequestNonce string `json:"request_nonce"`
	// InputTokens and OutputTokens are metered, over every attempt
	// (interrupted ones included); ClaimedCostUSD is what the agents
	// reported, summed, and CostUnderReported flags an attempt whose
	// reported cost is below half of its metered estimate.
	InputTokens       int64    `json:"input_tokens"`
	OutputTokens      int64    `json:"output_tokens"`
	ClaimedCostUSD    *float64 `json:"claimed_cost_usd"`
	CostUnderReported bool     `json:"cost_under_reported"`
}

// CostBases lists Totals.CostBasis values.
func CostBases() []string { return []string{"reported", "estimated", "none", "mixed", "unknown"} }

// Pending is TrialRow.Outcome for a trial with no attempt yet.
const Pending = "pending"

// Summarize builds the summary from the store.
func Summarize(p Plan, st Store, now time.Time) (Summary, error) {
	s := Summary{SchemaVersion: SummaryVersion, BatchID: p.BatchID, Name: p.Name, SpecDigest: p.SpecDigest, GeneratedAt: now.UTC(),
		MaxAttempts: p.MaxAttempts, Trials: len(p.Trials), Cells: []Cell{}, Agents: []AgentTotal{}, TrialList: []TrialRow{}}
	cells := map[[2]string]*cellAcc{}
	agents := map[string]*cellAcc{}
	var tests testAcc
	var cellOrder [][2]string
	var agentOrder []string
	for _, t := range p.Trials {
		rec, err := st.Load(t)
		if err != nil {
			return s, err
		}
		key := [2]string{t.Agent.Name, t.Task}
		if cells[key] == nil {
			cells[key] = &cellAcc{}
			cellOrder = append(cellOrder, key)
		}
		if agents[t.Agent.Name] == nil {
			agents[t.Agent.Name] = &cellAcc{}
			agentOrder = append(agentOrder, t.Agent.Name)
		}
		final := rec.Final(p.MaxAttempts)
		cells[key].add(t, rec, final)
		agents[t.Agent.Name].add(t, rec, final)
		row := TrialRow{TrialID: t.ID, Source: t.Source, SourceHead: t.SourceHead, Task: t.Task, Agent: t.Agent.Name, Repeat: t.Repeat,
			Outcome: Pending, Final: final, Attempts: len(rec.Attempts), Refused: len(rec.Refused)}
		if l := rec.Last(); l != nil {
			row.AttemptID = l.ID
			row.Outcome, row.RunID, row.RunDir, row.Worker, row.KeyID = string(l.Outcome), l.RunID, l.RunDir, l.Worker, l.KeyID
			if l.RunDir != "" {
				if rel, err := filepath.Rel(st.Dir, filepath.Join(l.RunDir, evidence.ReportHTML)); err == nil {
					row.ReportHTML = filepath.ToSlash(rel)
				}
			}
			row.RequestNonce = l.Nonce
			for _, a := range rec.Attempts {
				row.DurationMs += a.DurationMs
				row.QueueMs += a.QueueMs
			}
		}
		for _, a := range append(append([]Attempt(nil), rec.Attempts...), rec.Interrupted...) {
			row.InputTokens += a.InputTokens
			row.OutputTokens += a.OutputTokens
			if a.ReportedCost != nil {
				c := *a.ReportedCost
				if row.ClaimedCostUSD != nil {
					c += *row.ClaimedCostUSD
				}
				row.ClaimedCostUSD = &c
			}
			if UnderReported(t.Agent, a) {
				row.CostUnderReported = true
			}
		}
		if final {
			s.Finished++
			if l := rec.Last(); l != nil && l.Outcome.Scored() {
				tests.add(t.Task, t.Agent.Name, l.Tests)
			}
		}
		s.TrialList = append(s.TrialList, row)
	}
	s.Complete = s.Finished == s.Trials
	s.Tests = tests.list()
	for _, k := range cellOrder {
		a := cells[k]
		s.Cells = append(s.Cells, Cell{Agent: k[0], Task: k[1], Totals: a.totals(), PassAtK: passAtK(a.t.Trials, a.t.Scored, a.t.Passes),
			PassHatK: passHatK(a.t.Trials, a.t.Scored, a.t.Passes)})
	}
	for _, name := range agentOrder {
		a := agents[name]
		at := AgentTotal{Agent: name, Totals: a.totals(), Failures: a.failureList()}
		if at.Scored > 0 {
			at.PassRate = float64(at.Passes) / float64(at.Scored)
		}
		s.Agents = append(s.Agents, at)
	}
	return s, nil
}

type cellAcc struct {
	t       Totals
	cost    float64
	unknown bool
	bases   map[string]bool
	fails   map[FailureCount]int // keyed with Attempts 0
}

func (c *cellAcc) add(t Trial, rec TrialRecord, final bool) {
	c.t.Trials++
	c.t.Attempts += len(rec.Attempts)
	for _, a := range rec.Attempts {
		if a.Outcome == OutcomePass {
			continue
		}
		if c.fails == nil {
			c.fails = map[FailureCount]int{}
		}
		if len(a.Blockers) == 0 {
			c.fails[FailureCount{Outcome: string(a.Outcome)}]++
		}
		for _, code := range a.Blockers {
			c.fails[FailureCount{Outcome: string(a.Outcome), Code: code}]++
		}
	}
	for _, a := range append(append([]Attempt(nil), rec.Attempts...), rec.Interrupted...) {
		c.t.InputTokens += a.InputTokens
		c.t.OutputTokens += a.OutputTokens
		c.t.DurationMs += a.DurationMs
		c.t.QueueMs += a.QueueMs
		if cost, ok := Cost(t.Agent, a); ok {
			c.cost += cost.USD
			if c.bases == nil {
				c.bases = map[string]bool{}
			}
			c.bases[cost.Basis] = true
		} else {
			c.unknown = true
		}
	}
	if final {
		l := rec.Last()
		c.t.Finished++
		if l.Outcome.Scored() {
			c.t.Scored++
		}
		c.t.Outcomes.add(l.Outcome)
		if slices.Contains(l.Blockers, string(ctoharness.BlockTestFlake)) {
			c.t.Flaky++
		}
		if slices.Contains(l.Blockers, string(ctoharness.BlockAdversarialFailed)) {
			c.t.AdversaryRejected++
		}
		if l.Outcome == OutcomePass {
			c.t.Passes++
		}
	}
}

func (c *cellAcc) totals() Totals {
	t := c.t
	switch {
	case c.unknown:
		t.CostBasis = "unknown"
	case len(c.bases) == 1:
		for b := range c.bases {
			t.CostBasis = b
		}
	case len(c.bases) > 1:
		t.CostBasis = "mixed"
	default:
		t.CostBasis = "none" // no attempt yet
	}
	if !c.unknown {
		v := math.Round(c.cost*1e6) / 1e6
		t.CostUSD = &v
	}
	return t
}

// failureList is the failure counts in the order of AllOutcomes, the most
// frequent code of a class first.
func (c *cellAcc) failureList() []FailureCount {
	rank := map[string]int{}
	for i, o := range AllOutcomes() {
		rank[string(o)] = i
	}
	var out []FailureCount
	for k, n := range c.fails {
		k.Attempts = n
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if rank[a.Outcome] != rank[b.Outcome] {
			return rank[a.Outcome] < rank[b.Outcome]
		}
		if a.Attempts != b.Attempts {
			return a.Attempts > b.Attempts
		}
		return a.Code < b.Code
	})
	return out
}

// passAtK lists pass@k for k = 1..planned over n scored trials with c
// passes; nil values where k > n.
func passAtK(planned, n, c int) []PassAtK {
	return estimates(planned, n, func(k int) float64 {
		if n-c < k {
			return 1
		}
		// C(n-c,k)/C(n,k) = prod_{i=0}^{k-1} (n-c-i)/(n-i)
		q := 1.0
		for i := 0; i < k; i++ {
			q *= float64(n-c-i) / float64(n-i)
		}
		return 1 - q
	})
}

// passHatK lists pass^k, the chance that k trials drawn without
// replacement all pass: C(c,k)/C(n,k).
func passHatK(planned, n, c int) []PassAtK {
	return estimates(planned, n, func(k int) float64 {
		if c < k {
			return 0
		}
		q := 1.0
		for i := 0; i < k; i++ {
			q *= float64(c-i) / float64(n-i)
		}
		return q
	})
}

func estimates(planned, n int, f func(k int) float64) []PassAtK {
	out := []PassAtK{}
	for k := 1; k <= max(planned, n); k++ {
		e := PassAtK{K: k}
		if k <= n {
			v := math.Round(f(k)*1e6) / 1e6
			e.Value = &v
		}
		out = append(out, e)
	}
	return out
}

// WriteSummary writes batch.json (checked against its schema first),
// batch.dsse.json when a signer is given, and batch.html. It returns the
// signing key's id ("" unsigned).
func WriteSummary(ctx context.Context, st Store, s Summary, set *schemas.Set, signer *attest.Signer) (string, error) {
	s.SigningKeyID = ""
	if signer != nil {
		s.SigningKeyID = signer.Public().ID
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return "", err
	}
	data = append(data, '\n')
	if err := set.Validate(schemas.Batch, data); err != nil {
		return "", fmt.Errorf("batch.json does not match its schema (a bug; please report it): %w", err)
	}
	if err := writeFileAtomic(filepath.Join(st.Dir, SummaryJSON), data); err != nil {
		return "", err
	}
	page, err := Page(s)
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(filepath.Join(st.Dir, SummaryHTML), page); err != nil {
		return "", err
	}
	keyID := ""
	sig := filepath.Join(st.Dir, SummarySignature)
	if signer == nil {
		return "", removeIfExists(sig) // a stale signature over an older batch.json must not linger
	}
	sum := sha256.Sum256(data)
	stmt, err := attest.NewStatement([]attest.Subject{{Name: SummaryJSON, SHA256: hex.EncodeToString(sum[:])}}, BatchPredicateType,
		map[string]any{"batch_id": s.BatchID, "spec_digest": s.SpecDigest, "complete": s.Complete})
	if err != nil {
		return "", err
	}
	env, err := attest.Sign(ctx, signer, stmt)
	if err != nil {
		return "", err
	}
	keyID = signer.Public().ID
	return keyID, writeFileAtomic(sig, env)
}

// VerifySummary checks batch.dsse.json against the trusted keys and that it
// covers batch.json as it is; it returns the signing key's id.
func VerifySummary(ctx context.Context, dir string, trusted []attest.PublicKey) (string, error) {
	envData, err := readFile(filepath.Join(dir, SummarySignature))
	if err != nil {
		return "", fmt.Errorf("batch summary is not signed: %w", err)
	}
	env, err := attest.ParseEnvelope(envData)
	if err != nil {
		return "", err
	}
	id, err := env.Verify(ctx, trusted)
	if err != nil {
		return "", err
	}
	stmt, err := attest.ParseStatement(env.Payload)
	if err != nil {
		return "", err
	}
	if stmt.PredicateType != BatchPredicateType || len(stmt.Subjects) != 1 || stmt.Subjects[0].Name != SummaryJSON {
		return "", fmt.Errorf("%s is not a batch attestation over %s", SummarySignature, SummaryJSON)
	}
	data, err := readFile(filepath.Join(dir, SummaryJSON))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != stmt.Subjects[0].SHA256 {
		return "", fmt.Errorf("%s was changed after it was signed", SummaryJSON)
	}
	var rec struct {
		SigningKeyID string `json:"signing_key_id"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		return "", fmt.Errorf("%s: %w", SummaryJSON, err)
	}
	if rec.SigningKeyID != "" && rec.SigningKeyID != id {
		return "", fmt.Errorf("%s names signing key %s, but %s is signed by %s", SummaryJSON, rec.SigningKeyID, SummarySignature, id)
	}
	return id, nil
}

// sortedAgents is the agent names of a summary, sorted.
func sortedAgents(s Summary) []string {
	var out []string
	for _, a := range s.Agents {
		out = append(out, a.Agent)
	}
	sort.Strings(out)
	return out
}
