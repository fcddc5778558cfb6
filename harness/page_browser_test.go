package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport/cdp"
	"github.com/cto-harness/cto-harness/validators"
)

// agentCase is a scripted Case that talks like an agent adapter: the prompt,
// assistant text, a tool call with its result, a file change, token usage.
const agentCase = `#!/bin/sh
test -f "$CASE_TASK_FILE" || exit 9
echo '{"type":"case.started","agent":"scripted-agent","model":"test-model"}'
echo '{"type":"case.log","role":"user","message":"Add a note under docs/."}'
echo '{"type":"case.log","message":"I will add the note to docs/CASE_NOTES.md, then run the check."}'
echo "- note added by the fake Case" >> docs/CASE_NOTES.md
echo '{"type":"case.file_changed","path":"docs/CASE_NOTES.md"}'
echo '{"type":"case.command","tool":"shell","command":"sh scripts/check.sh","exit_code":0,"output":"check: 2 passed"}'
echo '{"type":"case.log","message":"Done: the note is in place and the check passes."}'
echo '{"type":"case.finished","status":"ok","turns":3,"usage":{"input_tokens":1234,"output_tokens":210}}'
`

// blockedAgentCase is a scripted agent run that is blocked: it reads a
// file, runs the tests (which fail), writes outside the allowed paths, and
// runs more commands than the smoke profile allows, so the harness refuses
// some. The page must show the calls, their outputs and the refusals.
const blockedAgentCase = `#!/bin/sh
echo '{"type":"case.started","agent":"scripted-agent","model":"test-model"}'
echo '{"type":"case.log","kind":"tool_call","tool":"read_file","call_id":"c1","arguments":"{\"path\":\"docs/guide.md\"}","message":"read_file"}'
echo '{"type":"case.log","kind":"tool_result","tool":"read_file","call_id":"c1","is_error":false,"message":"# Guide: the contents the agent read"}'
echo '{"type":"case.command","tool":"Bash","call_id":"c2","command":"go test ./..."}'
printf '%s\n' '{"type":"case.log","kind":"tool_result","tool":"Bash","call_id":"c2","is_error":true,"message":"--- FAIL: TestGreeting (0.00s)\n    greet_test.go:9: got hi, want hello"}'
mkdir -p src && echo evil > src/evil.sh
echo '{"type":"case.file_changed","tool":"Write","call_id":"c3","path":"src/evil.sh"}'
echo '{"type":"case.log","kind":"tool_result","tool":"Write","call_id":"c3","is_error":false,"message":"wrote src/evil.sh"}'
for i in 1 2 3 4 5 6 7 8 9; do /bin/true; done
echo '{"type":"case.finished","status":"ok"}'
`

// TestRunPageInBrowser renders report.html of a passing, a blocked and an
// agent-like stage 3 run in headless Chromium from file://, and checks what a
// person sees: the status, every blocker with its step (in the first screen),
// every changed file, no console errors, no horizontal scrolling in a narrow
// window. Screenshots are kept in the test's temp dir.
func TestRunPageInBrowser(t *testing.T) {
	exe := cdp.Find()
	if exe == "" {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); the run page's browser tests need it")
	}
	set := compile(t)
	base, _ := sharedStage3(t, set)
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte(agentCase), 0o755); err != nil {
		t.Fatal(err)
	}
	blocked := filepath.Join(t.TempDir(), "blocked-agent.sh")
	if err := os.WriteFile(blocked, []byte(blockedAgentCase), 0o755); err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		name   string
		status ctoharness.Status
		opts   func(o *harness.Options)
		text   []string // also on the page
	}{
		{"pass", ctoharness.StatusPass, func(o *harness.Options) {}, []string{"No blockers"}},
		{"blocked", ctoharness.StatusBlocked, func(o *harness.Options) { o.Scenario = "disallowed" },
			[]string{"outside the allowed paths"}},
		{"agent", ctoharness.StatusPass, func(o *harness.Options) {
			o.Lane = ctoharness.LaneReal
			o.CaseCmd = []string{"/bin/sh", script}
		}, []string{"agent scripted-agent (test-model)", "Conversation", "Add a note under docs/.", "I will add the note", "tool call: shell", "check: 2 passed", "input_tokens", "1234"}},
		// A blocked agent run: the page shows what explains it.
		{"agent-blocked", ctoharness.StatusBlocked, func(o *harness.Options) {
			o.Lane = ctoharness.LaneReal
			o.CaseCmd = []string{"/bin/sh", blocked}
			o.Profile = "smoke"
		}, []string{"tool call: read_file", `{"path":"docs/guide.md"}`, "# Guide: the contents the agent read",
			"result of Bash: ERROR", "--- FAIL: TestGreeting", "got hi, want hello", "write src/evil.sh (tool call: Write)",
			"REFUSED by the harness: COMMAND_BUDGET_SPENT"}},
	}
	shots := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, err := cdp.Launch(ctx, exe, filepath.Join(t.TempDir(), "chromium-profile"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			o := base
			k.opts(&o)
			rep, err := harness.Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Status != k.status || len(rep.ChangedFiles) == 0 {
				t.Fatalf("status %s, blockers %v, %d changed files", rep.Status, codes(rep), len(rep.ChangedFiles))
			}
			if res := validators.Run(context.Background(), rep.RunArtifactDir, set, validators.RunOptions{}); !res.OK {
				t.Fatalf("the run's evidence (with its page) does not validate: %v", res.Errors)
			}
			pagePath := filepath.Join(rep.RunArtifactDir, "report.html")
			p, err := b.Open(ctx, "file://"+pagePath, 1280, 900)
			if err != nil {
				t.Fatalf("%v\nchromium log:\n%s", err, b.Log())
			}
			var seen struct {
				Text          string  `json:"text"`
				Status        string  `json:"status"`
				BlockersTop   float64 `json:"blockersTop"`
				BlockerBottom float64 `json:"blockerBottom"`
				Height        float64 `json:"height"`
			}
			err = p.Eval(ctx, `(() => {
				const bl = document.getElementById("blockers").getBoundingClientRect();
				const items = [...document.querySelectorAll(".blocker")];
				const last = items.length ? items[items.length-1].getBoundingClientRect().bottom : bl.bottom;
				return {text: document.body.innerText, status: document.getElementById("status").innerText,
					blockersTop: bl.top, blockerBottom: last, height: window.innerHeight};
			})()`, &seen)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.EqualFold(seen.Status, string(k.status)) {
				t.Errorf("status shown %q, want %s", seen.Status, k.status)
			}
			want := append([]string{rep.RunID}, k.text...)
			for _, bl := range rep.Blockers {
				want = append(want, string(bl.Code), "at step "+string(bl.Step), bl.Message)
			}
			for _, f := range rep.ChangedFiles {
				want = append(want, f.Path)
			}
			for _, w := range want {
				if !strings.Contains(seen.Text, w) {
					t.Errorf("the rendered page does not show %q", w)
				}
			}
			if len(rep.Blockers) > 0 && (seen.BlockersTop >= seen.Height || seen.BlockerBottom > seen.Height) {
				t.Errorf("the blockers are not in the first screen: top %.0f, bottom %.0f, window %.0f", seen.BlockersTop, seen.BlockerBottom, seen.Height)
			}
			if err := p.Screenshot(ctx, filepath.Join(shots, k.name+".png"), true); err != nil {
				t.Fatal(err)
			}
			// A narrow window: nothing forces sideways scrolling of the page itself.
			if err := p.Resize(ctx, 380, 800); err != nil {
				t.Fatal(err)
			}
			var widths struct{ Scroll, Inner, Height, Blockers float64 }
			if err := p.Eval(ctx, `({Scroll: document.documentElement.scrollWidth, Inner: window.innerWidth,
				Height: window.innerHeight, Blockers: document.querySelector(".blocker:last-child, #blockers").getBoundingClientRect().bottom})`, &widths); err != nil {
				t.Fatal(err)
			}
			if widths.Scroll > widths.Inner+1 {
				t.Errorf("in a %.0f px window the page is %.0f px wide", widths.Inner, widths.Scroll)
			}
			if widths.Blockers > widths.Height {
				t.Errorf("in a narrow window the blockers end at %.0f px, below the first screen (%.0f px)", widths.Blockers, widths.Height)
			}
			if err := p.Screenshot(ctx, filepath.Join(shots, k.name+"-narrow.png"), false); err != nil {
				t.Fatal(err)
			}
			// Printed: the navigation is dropped, long blocks are not cut to a
			// scroll box, and the blockers and changed files are still there.
			if err := p.Resize(ctx, 1280, 900); err != nil {
				t.Fatal(err)
			}
			if err := p.EmulateMedia(ctx, "print"); err != nil {
				t.Fatal(err)
			}
			var printed struct {
				Nav, LogMax string
				Text        string
			}
			if err := p.Eval(ctx, `({Nav: getComputedStyle(document.querySelector("nav.toc")).display,
				LogMax: getComputedStyle(document.querySelector("pre.log")).maxHeight, Text: document.body.innerText})`, &printed); err != nil {
				t.Fatal(err)
			}
			if printed.Nav != "none" || printed.LogMax != "none" {
				t.Errorf("print styles not applied: nav display %q, log max-height %q", printed.Nav, printed.LogMax)
			}
			for _, f := range rep.ChangedFiles {
				if !strings.Contains(printed.Text, f.Path) {
					t.Errorf("the printed page lacks %s", f.Path)
				}
			}
			if err := p.PDF(ctx, filepath.Join(shots, k.name+".pdf")); err != nil {
				t.Fatal(err)
			}
			if msgs := p.Console(); len(msgs) > 0 {
				t.Errorf("console messages while showing the page: %q", msgs)
			}
			t.Logf("screenshots: %s/%s.png, %s-narrow.png", shots, k.name, k.name)
		})
	}
	if d := os.Getenv("CTO_HARNESS_KEEP_SCREENSHOTS"); d != "" {
		_ = os.MkdirAll(d, 0o755)
		entries, _ := os.ReadDir(shots)
		for _, e := range entries {
			if data, err := os.ReadFile(filepath.Join(shots, e.Name())); err == nil {
				_ = os.WriteFile(filepath.Join(d, e.Name()), data, 0o644)
			}
		}
	}
}
