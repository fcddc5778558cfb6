package htmlreport_test

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
	"github.com/cto-harness/cto-harness/harness/htmlreport/cdp"
)

// TestHeaderAndFailuresInBrowser opens the pages of a run failed by its
// tests and of a run blocked before its agent wrote a stream in headless
// Chromium, and checks what a person sees in the first screen: the
// repository and base commit, the counted tests with their unit, the
// failing test and its output; and that every link to a file reaches one.
// CTO_HARNESS_KEEP_SCREENSHOTS=dir keeps a screenshot of each.
func TestHeaderAndFailuresInBrowser(t *testing.T) {
	exe := cdp.Find()
	if exe == "" {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); the run page's browser tests need it")
	}
	tests, _ := json.Marshal(map[string]any{"schema_version": "1", "run_id": "r", "format": "go-test-json", "path": "out.json", "tests": []any{
		map[string]any{"id": "ex/TestA", "outcome": "pass", "duration_ms": 1},
		map[string]any{"id": "ex/TestGreeting", "outcome": "fail", "duration_ms": 1, "output": "greet_test.go:9: got hi, want hello\n" + strings.Repeat("more\n", 40)},
	}})
	code := 1
	failed := failedReport(ctoharness.TestsRecord{Command: "go test -json ./... > out.json", Classification: ctoharness.TestFailure, ExitCode: &code,
		LogPath: "test.log", Counts: &ctoharness.TestCounts{Passed: 1}, CountsFormat: "go-test-json-packages",
		Results: &ctoharness.TestResultsSummary{Format: "go-test-json", Path: "out.json", Artifact: "tests.json", Total: 2, Pass: 1, Fail: 1,
			Failing: []string{"ex/TestGreeting"}}})
	blocked := baseReport(ctoharness.StatusBlocked, []ctoharness.Blocker{{Code: ctoharness.BlockCaseStartFailed, Step: ctoharness.StepCase, Message: "the agent did not start"}}, nil)
	blocked["agent"] = map[string]any{"name": "qwen-code", "model": "m1", "stream_path": "backend/agent.stream.jsonl"}
	cases := []struct {
		name  string
		rep   map[string]any
		files map[string]string
		first []string // shown in the first screen
		text  []string // shown somewhere
	}{
		{"failed", failed, map[string]string{"tests.json": string(tests), "test.log": strings.Repeat("build output\n", 300)},
			[]string{"/home/dev/src/greeter", "base commit 0123456789ab", "ex/TestGreeting", "got hi, want hello",
				"2 tests: 1 passed, 1 failed, 0 skipped (per test, from the test report out.json)"}, nil},
		{"blocked-no-stream", blocked, map[string]string{"test.log": "\n"}, nil,
			[]string{"it left no stream (backend/agent.stream.jsonl is not in the run directory)"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := cdp.Launch(ctx, exe, filepath.Join(t.TempDir(), "chromium-profile"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raw, dir := writeRun(t, c.rep, c.files)
			page, err := htmlreport.Render(raw, dir)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, htmlreport.FileName)
			if err := os.WriteFile(path, page, 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := b.Open(ctx, "file://"+path, 1280, 900)
			if err != nil {
				t.Fatalf("%v\nchromium log:\n%s", err, b.Log())
			}
			var seen struct {
				Text   string   `json:"text"`
				First  []string `json:"first"` // text of the elements that start in the first screen
				Links  []string `json:"links"`
				Height float64  `json:"height"`
			}
			if err := p.Eval(ctx, `({text: document.body.innerText, height: window.innerHeight,
				first: [...document.querySelectorAll("#origin, #test-counts, #failing li, #failing pre")].filter(e => e.getBoundingClientRect().bottom <= window.innerHeight).map(e => e.innerText),
				links: [...document.querySelectorAll("a[href]")].map(a => a.getAttribute("href")).filter(h => !h.startsWith("#"))})`, &seen); err != nil {
				t.Fatal(err)
			}
			first := strings.Join(seen.First, "\n")
			for _, w := range c.first {
				if !strings.Contains(first, w) {
					t.Errorf("the first screen (%.0f px) does not show %q:\n%s", seen.Height, w, first)
				}
			}
			for _, w := range c.text {
				if !strings.Contains(seen.Text, w) {
					t.Errorf("the page does not show %q", w)
				}
			}
			for _, l := range seen.Links {
				u, err := url.Parse(l)
				if err != nil || u.Scheme != "" {
					t.Errorf("link %q leaves the run directory", l)
					continue
				}
				if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(u.Path))); err != nil {
					t.Errorf("link %q reaches no file: %v", l, err)
				}
			}
			if d := os.Getenv("CTO_HARNESS_KEEP_SCREENSHOTS"); d != "" {
				_ = os.MkdirAll(d, 0o755)
				if err := p.Screenshot(ctx, filepath.Join(d, "header-"+c.name+".png"), false); err != nil {
					t.Fatal(err)
				}
			}
			if err := p.Resize(ctx, 380, 800); err != nil {
				t.Fatal(err)
			}
			var widths struct{ Scroll, Inner float64 }
			if err := p.Eval(ctx, `({Scroll: document.documentElement.scrollWidth, Inner: window.innerWidth})`, &widths); err != nil {
				t.Fatal(err)
			}
			if widths.Scroll > widths.Inner+1 {
				t.Errorf("in a %.0f px window the page is %.0f px wide", widths.Inner, widths.Scroll)
			}
			if msgs := p.Console(); len(msgs) > 0 {
				t.Errorf("console messages while showing the page: %q", msgs)
			}
		})
	}
}
