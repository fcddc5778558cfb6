package batch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/attest"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/checked"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/task"
	"github.com/cto-harness/cto-harness/harness/taskcheck"
	"github.com/cto-harness/cto-harness/schemas"
)

// Trial is one planned run: everything an executor on any machine needs.
type Trial struct {
	ID         string          `json:"trial_id"`
	BatchID    string          `json:"batch_id"`
	SpecDigest string          `json:"spec_digest"` // the batch spec's; the batch id carries its first 12 digits
	Source     string          `json:"source"`
	SourceHead string          `json:"source_head"`
	Task       string          `json:"task"`
	TaskDigest string          `json:"task_digest"`
	TaskSpec   json.RawMessage `json:"task_spec"` // the canonical task spec the digest is over
	Agent      Agent           `json:"agent"`
	Repeat     int             `json:"repeat"` // 1..repeats
	Profile    string          `json:"profile,omitempty"`

	AllowNet       []string `json:"allow_net,omitempty"`
	VerifyAllowNet []string `json:"verify_allow_net,omitempty"`
	SetupAllowNet  []string `json:"setup_allow_net,omitempty"`
	// TaskCheck is the task check record the trial requires, byte for byte
	// (verified when the batch was planned, then carried in the signed
	// request), and TaskCheckKey the trusted key that signed it.
	TaskCheck    json.RawMessage `json:"task_check,omitempty"`
	TaskCheckKey string          `json:"task_check_key,omitempty"`
}

// Plan is a batch's trials, in a stable order (source, task, agent, repeat).
type Plan struct {
	BatchID     string
	Name        string
	SpecDigest  string
	MaxAttempts int
	Trials      []Trial
}

// TrialID is derived from what makes a trial the trial it is: the source's
// path and HEAD commit (two checkouts of one commit are two sources), the
// task's digest, the agent (name, kind, model, scenario) and the repeat
// index. Retries of a trial keep its id (each attempt has its own,
// AttemptID). The same spec over the same commits plans the same ids, which
// is what resume and the NATS path's exactly-once counting key on.
func TrialID(source, sourceHead, taskDigest string, a Agent, repeat int) string {
	h := sha256.New()
	fmt.Fprintf(h, "cto-harness trial v1\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%s\x00%d", source, sourceHead, taskDigest, a.Name, a.Kind, a.Model+"\x00"+a.Scripted, a.Scenario, repeat)
	return "t-" + hex.EncodeToString(h.Sum(nil))[:20]
}

// AttemptID names one attempt of a trial: the trial's id and the attempt's
// index (1, 2, ...). The trial is what is counted (pass@k is over trials);
// the attempt is what ran, and its id is what a worker's result, the
// archive it uploads and a trial record's attempt are keyed by. It is as
// deterministic as the trial id: the second attempt of a trial has the same
// id in every run of the spec.
func AttemptID(trialID string, attempt int) string {
	return fmt.Sprintf("%s-a%d", trialID, attempt)
}

// MakePlan resolves every source's HEAD and every task's spec and lists the
// trials. A source that is not a git repository with a HEAD commit is an
// error of the spec: nothing runs.
//
// A task's task_check record is read and verified against trusted (a
// signed record must verify; an unsigned one is taken only when no key is
// trusted), and every trial of the task carries it.
func MakePlan(ctx context.Context, s Spec, set *schemas.Set, trusted ...attest.PublicKey) (Plan, error) {
	canon, err := json.Marshal(s)
	if err != nil {
		return Plan{}, err
	}
	sum := sha256.Sum256(canon)
	p := Plan{Name: s.Name, SpecDigest: hex.EncodeToString(sum[:]), MaxAttempts: s.Attempts()}
	p.BatchID = fmt.Sprintf("%s-%s", s.Name, p.SpecDigest[:12])
	heads := make([]string, len(s.Sources))
	for i, src := range s.Sources {
		h, err := SourceHead(src)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: source %s: %v; each source must be a git repository with a commit", ErrSpec, src, err)
		}
		heads[i] = h
	}
	type loaded struct {
		raw    json.RawMessage
		digest string
		check  *checked.Record
	}
	tasks := make([]loaded, len(s.Tasks))
	for i, t := range s.Tasks {
		var spec task.Spec
		if t.Spec == "" {
			spec = harness.DefaultSpec()
		} else if spec, err = task.Load(ctx, t.Spec, set.Validator(schemas.TaskSpec)); err != nil {
			return Plan{}, fmt.Errorf("%w: task %q: %v", ErrSpec, t.Name, err)
		}
		raw, err := json.Marshal(spec)
		if err != nil {
			return Plan{}, err
		}
		d := sha256.Sum256(raw)
		tasks[i] = loaded{raw: raw, digest: hex.EncodeToString(d[:])}
		if t.TaskCheck != "" {
			if tasks[i].check, err = taskcheck.Load(ctx, t.TaskCheck, set.Validator(schemas.TaskCheck), trusted); err != nil {
				return Plan{}, fmt.Errorf("%w: task %q: %v", ErrSpec, t.Name, err)
			}
		}
	}
	for si, src := range s.Sources {
		for ti, t := range s.Tasks {
			for _, a := range s.Agents {
				for r := 1; r <= s.Repeats; r++ {
					p.Trials = append(p.Trials, Trial{
						ID: TrialID(src, heads[si], tasks[ti].digest, a, r), BatchID: p.BatchID, SpecDigest: p.SpecDigest,
						Source: src, SourceHead: heads[si], Task: t.Name, TaskDigest: tasks[ti].digest, TaskSpec: tasks[ti].raw,
						Agent: a, Repeat: r, Profile: s.Profile,
						AllowNet: s.AllowNet, VerifyAllowNet: s.VerifyAllowNet, SetupAllowNet: s.SetupAllowNet,
					})
					if c := tasks[ti].check; c != nil {
						p.Trials[len(p.Trials)-1].TaskCheck, p.Trials[len(p.Trials)-1].TaskCheckKey = c.Raw, c.KeyID
					}
				}
			}
		}
	}
	seen := map[string]bool{}
	for _, t := range p.Trials {
		if seen[t.ID] {
			return Plan{}, fmt.Errorf("%w: trial %s (%s) is planned twice", ErrSpec, t.ID, label(t.Agent.Name, t.Task))
		}
		seen[t.ID] = true
	}
	return p, nil
}

// SourceHead is the commit HEAD names in the repository at dir (its git
// directory may be kept elsewhere, named by a gitfile). The
// repository is opened without go-git's config parser, which rejects
// files git reads.
func SourceHead(dir string) (string, error) {
	r, err := gitstatus.Open(dir, gitstatus.GitDirOf(dir))
	if err != nil {
		return "", err
	}
	ref, err := r.Head()
	if err != nil {
		return "", err
	}
	return ref.Hash().String(), nil
}

// Spec decodes the trial's task spec.
func (t Trial) Spec(set *schemas.Set) (task.Spec, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, t.TaskSpec); err != nil {
		return task.Spec{}, fmt.Errorf("trial %s: the task spec is not JSON: %w", t.ID, err)
	}
	d := sha256.Sum256(compact.Bytes())
	if hex.EncodeToString(d[:]) != t.TaskDigest {
		return task.Spec{}, fmt.Errorf("trial %s: the task spec does not match its digest %s", t.ID, t.TaskDigest)
	}
	return task.Parse(t.TaskSpec, "trial "+t.ID, set.Validator(schemas.TaskSpec))
}

// Binding is what a run of this trial's attempt, made for the request with
// the given nonce, must record.
func (t Trial) Binding(attempt int, nonce string) ctoharness.TrialBinding {
	return ctoharness.TrialBinding{BatchID: t.BatchID, SpecDigest: t.SpecDigest, TrialID: t.ID, AttemptID: AttemptID(t.ID, attempt),
		Attempt: attempt, Nonce: nonce, TaskDigest: t.TaskDigest, Source: t.Source, SourceHead: t.SourceHead,
		Agent: t.Agent.Name, AgentKind: t.Agent.Kind, Model: t.Agent.Model, Repeat: t.Repeat}
}

// CheckBinding says why a run's recorded binding is not the one the
// request (trial, attempt, nonce) asked for, naming each field that
// differs; "" means it is that request's run. A run with no binding, one
// made for another trial, attempt or batch, or for an earlier request of
// the same attempt (another nonce) is never the request's.
func CheckBinding(t Trial, attempt int, nonce string, got *ctoharness.TrialBinding) string {
	if got == nil {
		return "the run records no trial binding: it was not made for this request"
	}
	want := t.Binding(attempt, nonce)
	var diff []string
	field := func(name, w, g string) {
		if w != g {
			diff = append(diff, fmt.Sprintf("%s %q, the request's %q", name, g, w))
		}
	}
	field("batch", want.BatchID, got.BatchID)
	field("spec digest", want.SpecDigest, got.SpecDigest)
	field("trial", want.TrialID, got.TrialID)
	field("attempt", want.AttemptID, got.AttemptID)
	field("attempt number", fmt.Sprint(want.Attempt), fmt.Sprint(got.Attempt))
	field("request nonce", want.Nonce, got.Nonce)
	field("task digest", want.TaskDigest, got.TaskDigest)
	field("source", want.Source, got.Source)
	field("source HEAD", want.SourceHead, got.SourceHead)
	field("agent", want.Agent, got.Agent)
	field("agent kind", want.AgentKind, got.AgentKind)
	field("model", want.Model, got.Model)
	field("repeat", fmt.Sprint(want.Repeat), fmt.Sprint(got.Repeat))
	if len(diff) == 0 {
		return ""
	}
	return "the run is bound to another trial: " + strings.Join(diff, "; ")
}
