// Package reportmd renders a run's report as report.md, the page a person
// reads in a terminal or a pull request. It reads the report only, so
// validate can render the same bytes again and compare them with the run's
// own report.md.
package reportmd

import (
	"fmt"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/display"
)

// Markdown renders the report for a person.
func Markdown(rep *ctoharness.Report) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# cto-harness run %s\n\n", mdText(rep.RunID))
	fmt.Fprintf(&b, "- status: **%s** (outcome %s)\n- stage: %d (%s)\n- backend: %s, lane: %s\n", mdText(string(rep.Status)), mdText(string(rep.Outcome)),
		rep.Stage, mdText(rep.StageName), mdText(string(rep.Backend)), mdText(string(rep.CaseLane)))
	fmt.Fprintf(&b, "- Case process started: %v\n- source repository mutated: %v\n", rep.CaseProcessStarted, rep.SourceRepositoryMutated)
	fmt.Fprintf(&b, "- source: %s\n- fixture: %s\n- run artifact dir: %s\n- runtime workspace root: %s\n",
		mdPath(rep.SourcePath), mdPath(rep.FixturePath), mdPath(rep.RunArtifactDir), mdPath(rep.RuntimeWorkspaceRoot))
	fmt.Fprintf(&b, "- started: %s, finished: %s\n\n", rep.Freshness.StartedAt.Format("2006-01-02T15:04:05.000Z07:00"), rep.Freshness.FinishedAt.Format("2006-01-02T15:04:05.000Z07:00"))
	if rep.SampleTask {
		b.WriteString("**The built-in sample task ran (--sample-task):** the verdict covers that task only, none of the repository's tests.\n\n")
	}
	blockers(&b, rep)
	verification(&b, rep)
	adversarial(&b, rep.Adversarial)
	commits(&b, rep)
	agent(&b, rep.Agent)
	sandbox(&b, rep)
	network(&b, rep.Network)
	trailer(&b, rep)
	return []byte(b.String())
}

// blockers is the blockers and changed files sections.
func blockers(b *strings.Builder, rep *ctoharness.Report) {
	b.WriteString("## Blockers\n\n")
	if len(rep.Blockers) == 0 {
		b.WriteString("none\n")
	}
	for _, bl := range rep.Blockers {
		fmt.Fprintf(b, "- %s at %s: %s\n", display.MarkdownCode(string(bl.Code)), mdText(string(bl.Step)), mdText(bl.Message))
	}
	b.WriteString("\n## Changed files\n\n")
	if len(rep.ChangedFiles) == 0 {
		b.WriteString("none\n")
	}
	for _, c := range rep.ChangedFiles[:min(len(rep.ChangedFiles), ctoharness.MaxFilesShown)] {
		verdict := "allowed"
		if !c.Allowed {
			verdict = "NOT allowed: " + mdText(c.Reason)
		}
		fmt.Fprintf(b, "- %s (%s, %s)\n", mdText(c.Path), mdText(string(c.Change)), verdict)
	}
	if more, outside := ctoharness.FilesNotShown(rep.ChangedFiles); more > 0 {
		fmt.Fprintf(b, "- and %d more (%d of them NOT allowed); report.json's changed_files and patch.diff list them all\n", more, outside)
	}
}

// verification is the verification section: the command and the test report it wrote.
func verification(b *strings.Builder, rep *ctoharness.Report) {
	fmt.Fprintf(b, "\n## Verification\n\n- command: %s\n- classification: %s\n", display.MarkdownCode(rep.Tests.Command), mdText(string(rep.Tests.Classification)))
	if rep.Tests.ExitCode != nil {
		fmt.Fprintf(b, "- exit code: %d\n", *rep.Tests.ExitCode)
	}
	if rep.Tests.VerifiedCommit != "" {
		fmt.Fprintf(b, "- ran on a fresh checkout of the result: commit %s (tree %s)\n", mdText(rep.Tests.VerifiedCommit), mdText(rep.Tests.VerifiedTree))
	}
	if rep.Tests.Reason != "" {
		fmt.Fprintf(b, "- reason: %s\n", mdText(rep.Tests.Reason))
	}
	if t := rep.Tests.Results; t != nil {
		fmt.Fprintf(b, "- test report %s (%s): %d tests, %d passed, %d failed, %d errored, %d skipped, %d expected failures\n",
			mdText(t.Path), mdText(t.Format), t.Total, t.Pass, t.Fail, t.Error, t.Skip, t.XFail)
		if len(t.Failing) > 0 {
			fmt.Fprintf(b, "- failing: %s\n", mdText(strings.Join(t.Failing, ", ")))
		}
		if t.Problem != "" {
			fmt.Fprintf(b, "- test report problem: %s\n", mdText(t.Problem))
		}
	}
}

// adversarial is the adversarial tests section, when the task has an adversary.
func adversarial(b *strings.Builder, a *ctoharness.AdversarialRecord) {
	if a != nil {
		fmt.Fprintf(b, "\n## Adversarial tests\n\n- adversary: %s\n- discriminating tests (failed on the baseline): %d, failed on the result: %d; tests that tell nothing: %d; excluded files: %d\n",
			mdText(strings.Join(a.Command, " ")), a.Discriminating, a.Failed, countClass(a.Tests, ctoharness.AdversaryNotDiscriminating), len(a.Excluded))
		if ag := a.Agent; ag != nil {
			requests := 0
			if ag.Usage != nil {
				requests = ag.Usage.Requests
			}
			fmt.Fprintf(b, "- the adversary is the agent %s %s, model %s: %d model requests, cost %s\n", mdText(ag.Name), mdText(ag.Version), mdText(ag.Model),
				requests, mdText(CostText(ag.Usage)))
			if ag.Warning != "" {
				fmt.Fprintf(b, "- **warning:** %s\n", mdText(ag.Warning))
			}
		}
		if a.Problem != "" {
			fmt.Fprintf(b, "- the step could not finish: %s\n", mdText(a.Problem))
		}
	}
}

// commits is the commits section: source, base, what history Case saw, baseline and result.
func commits(b *strings.Builder, rep *ctoharness.Report) {
	fmt.Fprintf(b, "\n## Commits\n\n- source HEAD %s (tree %s)\n", mdText(orNone(rep.Commits.SourceHead)), mdText(orNone(rep.Commits.SourceTree)))
	if c := rep.Commits; c.BaseCommit != "" && c.BaseCommit != c.SourceHead {
		fmt.Fprintf(b, "- base %s (tree %s): the task starts from this commit, not HEAD\n", mdText(c.BaseCommit), mdText(c.BaseTree))
	}
	if fo := rep.FixtureObjects; fo != nil && (fo.History != "full" || fo.LeftOut > 0) {
		fmt.Fprintf(b, "- Case's .git: history %s (commits: %d, objects: %d); objects of the source left out: %d\n", mdText(fo.History), fo.Commits, fo.Objects, fo.LeftOut)
	}
	fmt.Fprintf(b, "- baseline %s (tree %s)\n- result %s (tree %s)\n",
		mdText(orNone(rep.Commits.BaselineCommit)),
		mdText(orNone(rep.Commits.BaselineTree)), mdText(orNone(rep.Commits.ResultCommit)), mdText(orNone(rep.Commits.ResultTree)))
}

// sandbox is the sandbox section.
func sandbox(b *strings.Builder, rep *ctoharness.Report) {
	fmt.Fprintf(b, "\n## Sandbox\n\n- enforced: %v (%s)\n- writable: %s\n", rep.Sandbox.Enforced, mdText(strings.Join(rep.Sandbox.Mechanisms, ", ")),
		mdText(strings.Join(rep.Sandbox.WritableRoots, ", ")))
	if rep.Sandbox.NotEnforcedReason != "" {
		fmt.Fprintf(b, "- %s\n", mdText(rep.Sandbox.NotEnforcedReason))
	}
}

// trailer is the freshness and signature sections.
func trailer(b *strings.Builder, rep *ctoharness.Report) {
	fmt.Fprintf(b, "\n## Freshness\n\n- nonce %s\n- events %d, final hash %s\n- harness %s\n",
		mdText(rep.Freshness.Nonce), rep.Freshness.Events, mdText(rep.Freshness.FinalEventHash), mdText(rep.Freshness.HarnessVersion))
	if rep.Signed {
		fmt.Fprintf(b, "\n## Signature\n\n- signed by key %s: attestation.dsse.json follows this report and covers every other file\n", mdText(rep.SigningKeyID))
	} else {
		fmt.Fprintf(b, "\n## Signature\n\n- unsigned (%s): the digests show the evidence is intact, not who made it\n", mdText(rep.UnsignedReason))
	}
}

// mdText is report.md's form of any text the report holds: whatever a field
// says (a blocker message quoting Case's file names, a reason), it cannot
// start a line, a heading or a tag.
func mdText(s string) string { return display.MarkdownText(s) }

// mdPath shows a path as a code span, or (none).
func mdPath(p string) string {
	if p == "" {
		return "(none)"
	}
	return display.MarkdownCode(p)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// countClass counts the adversarial tests of class.
func countClass(tests []ctoharness.AdversarialTest, class string) int {
	n := 0
	for _, t := range tests {
		if t.Class == class {
			n++
		}
	}
	return n
}

// agentMarkdown is report.md's section on the coding agent.
func agent(b *strings.Builder, a *ctoharness.AgentRecord) {
	if a == nil {
		return
	}
	fmt.Fprintf(b, "\n## Agent\n\n- %s %s, model %s, endpoint %s\n", mdText(a.Name), mdText(a.Version), mdText(orNone(a.Model)), mdText(orNone(a.Endpoint)))
	if u := a.Usage; u != nil {
		fmt.Fprintf(b, "- model requests (turns): %d, %d failed; tokens in: %d uncached + %d cache read + %d cache write; out: %d; cost: %s\n",
			u.Requests, u.Failed, u.InputUncached, u.CacheRead, u.CacheWrite, u.Output, CostText(u))
	} else {
		b.WriteString("- model requests: none (the agent was not started)\n")
	}
	fmt.Fprintf(b, "- the agent's own account: finished %v, turns %d, tokens %d in / %d out / %d cached (its own convention), API time %d ms\n",
		a.Finished, a.Turns, a.InputTokens, a.OutputTokens, a.CachedTokens, a.APITimeMs)
	fmt.Fprintf(b, "- %d shell commands, %d file writes, %d native stream lines (%d unknown) in %s\n",
		a.Commands, a.FileWrites, a.NativeLines, a.UnknownLines, mdText(a.StreamPath))
	if a.ResultError != "" {
		fmt.Fprintf(b, "- error: %s\n", mdText(a.ResultError))
	}
	if len(a.AttemptedEscapes) > 0 {
		fmt.Fprintf(b, "- attempted writes outside the fixture: %s\n", mdText(strings.Join(a.AttemptedEscapes, ", ")))
	}
	if len(a.SecretEnv) > 0 {
		fmt.Fprintf(b, "- secrets passed (values redacted): %s\n", mdText(strings.Join(a.SecretEnv, ", ")))
	}
	for _, n := range a.Notes {
		fmt.Fprintf(b, "- %s\n", mdText(n))
	}
}

// CostText is a run's cost for people: the amount and where it comes from,
// or "not reported" (never $0 for unknown).
func CostText(u *ctoharness.ModelUsage) string {
	if u == nil || u.CostUSD == nil {
		return "not reported"
	}
	if u.CostSource == ctoharness.CostEstimated {
		return fmt.Sprintf("$%.4f (estimated from the config's prices)", *u.CostUSD)
	}
	return fmt.Sprintf("$%.4f (reported by the agent)", *u.CostUSD)
}

// networkMarkdown is report.md's network section, when a policy was in force.
func network(b *strings.Builder, n *ctoharness.NetworkSummary) {
	if n == nil {
		return
	}
	rules := func(l []ctoharness.NetworkRule) string {
		var out []string
		for _, r := range l {
			out = append(out, r.Endpoint+" ("+r.Source+")")
		}
		if len(out) == 0 {
			return "nothing"
		}
		return strings.Join(out, ", ")
	}
	fmt.Fprintf(b, "\n## Network\n\n- Case may reach: %s\n- verification may reach: %s\n", mdText(rules(n.Policy.Case)), mdText(rules(n.Policy.Verification)))
	if len(n.Policy.Setup) > 0 {
		fmt.Fprintf(b, "- the setup command may reach: %s\n", mdText(rules(n.Policy.Setup)))
	}
	fmt.Fprintf(b, "- %d attempt(s): %d allowed, %d denied, %d failed; %d bytes up, %d down (see %s)\n",
		n.Attempts, n.Allowed, n.Denied, n.Failed, n.BytesUp, n.BytesDown, mdText(n.LogPath))
	for _, d := range n.DeniedLog {
		if d.Host == "" && d.Port == 0 {
			// A refused socket call names no endpoint; its reason says
			// which call.
			fmt.Fprintf(b, "- denied: %s: %s\n", mdText(d.Command), mdText(d.Reason))
			continue
		}
		fmt.Fprintf(b, "- denied: %s %s:%d: %s\n", mdText(d.Command), mdText(d.Host), d.Port, mdText(d.Reason))
	}
	if len(n.Limits.Exceeded) > 0 {
		fmt.Fprintf(b, "- limits reached: %s\n", mdText(strings.Join(n.Limits.Exceeded, ", ")))
	}
}
