package htmlreport_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/htmlreport"
)

// hostile is text a Case controls: file names, messages, patch lines.
const hostile = `<script>alert(1)</script><img src=x onerror=alert(2)>`

func writeRun(t *testing.T, rep map[string]any, files map[string]string) ([]byte, string) {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	return raw, dir
}

func baseReport(status ctoharness.Status, blockers []ctoharness.Blocker, changed []ctoharness.ChangedFile) map[string]any {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := ctoharness.Report{SchemaVersion: "1.0.0", RunID: "20260102T030405Z-s3-abcd0123", Stage: 3, StageName: "copied owned repo",
		Status: status, Backend: ctoharness.BackendCase, CaseLane: ctoharness.LaneFake, Blockers: blockers, ChangedFiles: changed,
		AllowedPaths: []string{"docs/**"}, Profile: "fast",
		Tests:     ctoharness.TestsRecord{Command: "sh check.sh", Classification: ctoharness.TestPass, LogPath: "test.log"},
		Freshness: ctoharness.Freshness{RunID: "20260102T030405Z-s3-abcd0123", StartedAt: start, FinishedAt: start.Add(1500 * time.Millisecond), HarnessVersion: "0.1.0"}}
	raw, _ := json.Marshal(r)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

func events(t testing.TB, types ...string) string {
	t.Helper()
	var b strings.Builder
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, ty := range types {
		data := map[string]any{}
		switch ty {
		case "case.log":
			data["message"] = "I will edit " + hostile
		case "case.command":
			data["command"] = "go test ./..."
			data["exit_code"] = 0
		case "case.file_changed":
			data["path"] = "docs/a.md"
		case "case.finished":
			data["status"] = "ok"
			data["usage"] = map[string]any{"input_tokens": 1200, "output_tokens": 345}
		case "run_blocked":
			data = map[string]any{"code": "DISALLOWED_CHANGE", "step": "collect", "message": "outside"}
		}
		line, _ := json.Marshal(map[string]any{"seq": i + 1, "time": at.Add(time.Duration(i) * 100 * time.Millisecond), "run_id": "r",
			"type": ty, "data": data, "prev": "x"})
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

const patch = `diff --git a/docs/a.md b/docs/a.md
new file mode 100644
--- /dev/null
+++ b/docs/a.md
@@ -0,0 +1 @@
+hello
diff --git a/main.go b/main.go
--- a/main.go
+++ b/main.go
@@ -1,2 +1,2 @@
 package main
-// old "x" 42
+func f() string { return "</pre>` + hostile + `" }
`

func TestRenderShowsRunAndEscapesHostileText(t *testing.T) {
	rep := baseReport(ctoharness.StatusBlocked,
		[]ctoharness.Blocker{{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect, Message: "changed " + hostile}},
		[]ctoharness.ChangedFile{{Path: "docs/a.md", Change: ctoharness.ChangeAdded, Allowed: true},
			{Path: "main.go", Change: ctoharness.ChangeModified, Allowed: false, Reason: "outside the allowed paths docs/**"}})
	raw, dir := writeRun(t, rep, map[string]string{
		"events.normalized.jsonl": events(t, "run_started", "case_process_started", "case.started", "case.log", "case.command",
			"case.file_changed", "case.finished", "case_process_exited", "run_blocked", "run_finished"),
		"patch.diff": patch,
		"test.log":   "ok\n",
		"task.json":  `{"task":"do it","allowed_paths":["docs/**"]}`,
	})
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	if regexp.MustCompile(`(?i)<(script|img|iframe|link)\b`).MatchString(s) {
		t.Fatal("the page contains an element that loads or runs something")
	}
	if regexp.MustCompile(`(?i)(src|href)\s*=\s*"?(https?:)?//`).MatchString(s) {
		t.Fatal("the page references something outside itself")
	}
	for _, want := range []string{
		`id="status">blocked<`, "DISALLOWED_CHANGE", "at step <b>collect</b>", `href="#ev-9"`, // blocker linked to its event
		"docs/a.md", "main.go", "outside the allowed paths", `class="changed-file outside"`,
		`<span class="kw">func</span>`, `<span class="str">`, // highlighted Go
		"I will edit &lt;script&gt;", "go test ./...", "input_tokens", // the conversation
		"not signed", "&#43;100ms",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	again, _ := htmlreport.Render(raw, dir)
	if !bytes.Equal(page, again) {
		t.Fatal("rendering is not deterministic")
	}
}

// Fields other parts of the harness add (agent, signature, network, the
// sandbox view) are shown when present, and their absence is no error.
func TestRenderOptionalSections(t *testing.T) {
	rep := baseReport(ctoharness.StatusPass, nil, nil)
	rep["agent"] = map[string]any{"name": "qwen-code", "model": "m1", "stream_path": "backend/agent.stream.jsonl", "usage": map[string]any{
		"requests": 2, "failed": 1, "input_uncached_tokens": 7, "cache_read_tokens": 3, "cache_write_tokens": 0, "output_tokens": 5,
		"cost_usd": nil, "cost_source": "not_reported", "per_request": []any{
			map[string]any{"seq": 1, "at": "2026-11-25T05:00:00Z", "api": "openai-chat", "status": 200, "latency_ms": 12, "input_uncached_tokens": 7, "cache_read_tokens": 3, "cache_write_tokens": 0, "output_tokens": 5},
			map[string]any{"seq": 2, "at": "2026-11-25T05:00:01Z", "api": "openai-chat", "status": 500, "error": "HTTP 500", "latency_ms": 3, "input_uncached_tokens": 0, "cache_read_tokens": 0, "cache_write_tokens": 0, "output_tokens": 0}}}}
	rep["signed"] = true
	rep["signing_key_id"] = "k-123"
	rep["network"] = map[string]any{"allowed": 1, "denied": 1}
	rep["sandbox"].(map[string]any)["view"] = map[string]any{"digest": "abc", "mounts": []any{
		map[string]any{"path": "/usr", "kind": "bind", "mode": "ro"}, map[string]any{"path": "/work/fixture", "kind": "bind", "mode": "rw"}}}
	rep["sandbox"].(map[string]any)["verification_view"] = map[string]any{"digest": "def", "mounts": []any{
		map[string]any{"path": "/verify/only", "kind": "tmpfs", "mode": "rw"}}}
	raw, dir := writeRun(t, rep, map[string]string{
		"network.jsonl": `{"time":"t","command":"case","host":"api.example","port":443,"decision":"allowed","rule":"api.example:443"}
{"time":"t","command":"case","host":"evil.example","port":443,"decision":"denied","reason":"not in the allowlist"}
`})
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{"agent qwen-code", "Model requests (turns): <b>2</b>", "Cost: <b>not reported</b>", "500 (HTTP 500)", "7 / 3 / 0", "signed (key k-123; attestation.dsse.json)", `id="network"`,
		"evil.example", `class="denied"`, "not in the allowlist", "/work/fixture", "/verify/only", "verification command&#39;s filesystem view", "No blockers", "Nothing changed"} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// The same report without any artifact beside it still renders.
	bare, err := htmlreport.Render(raw, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(bare), `id="status">pass<`) {
		t.Fatal("a page without artifacts lost its status")
	}
}

func TestRenderCapsLargeArtifacts(t *testing.T) {
	rep := baseReport(ctoharness.StatusPass, nil, nil)
	var log strings.Builder
	for i := 0; i < 5000; i++ {
		log.WriteString("line of test output\n")
	}
	raw, dir := writeRun(t, rep, map[string]string{"test.log": log.String()})
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(page), "4800 lines left out") {
		t.Fatal("a long test log is not cut to an excerpt")
	}
	if len(page) > 64<<10 {
		t.Fatalf("page is %d bytes for a 100 KB log", len(page))
	}

	// A 5 MiB patch: read up to the cap, and the diff cut with a note.
	var p strings.Builder
	p.WriteString("diff --git a/big.txt b/big.txt\n--- a/big.txt\n+++ b/big.txt\n@@ -1,1 +1,30000 @@\n")
	for p.Len() < 5<<20 {
		p.WriteString("+" + strings.Repeat("x", 199) + "\n")
	}
	raw, dir = writeRun(t, rep, map[string]string{"patch.diff": p.String()})
	page, err = htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"patch.diff is larger than 4 MiB", "The diff is cut"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if len(page) > 8<<20 {
		t.Fatalf("page is %d bytes", len(page))
	}
}

func TestRenderRejectsMalformedReport(t *testing.T) {
	if _, err := htmlreport.Render([]byte("{"), t.TempDir()); err == nil {
		t.Fatal("a malformed report rendered")
	}
}

// The page the harness renders from its in-memory report is the page the
// validator renders from report.json, whose digests are filled in later.
func TestRenderReportEqualsRenderOfReportJSON(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.UTC)
	code := 0
	rep := &ctoharness.Report{SchemaVersion: "1.0.0", RunID: "r1", Stage: 2, Status: ctoharness.StatusBlocked,
		Blockers:     []ctoharness.Blocker{{Code: ctoharness.BlockTestsFailed, Step: ctoharness.StepVerify, Message: `a & b < c "d"`}},
		ChangedFiles: []ctoharness.ChangedFile{{Path: "x&y.go", Change: ctoharness.ChangeAdded}},
		Case:         ctoharness.CaseRecord{ExitCode: &code, StderrInline: "ünïcödé\x00"},
		Freshness:    ctoharness.Freshness{StartedAt: start, FinishedAt: start.Add(time.Second)}}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "patch.diff"), []byte(patch), 0o644)
	mem, err := htmlreport.RenderReport(rep, dir)
	if err != nil {
		t.Fatal(err)
	}
	rep.ArtifactDigests = map[string]string{"report.html": "0000"}
	onDisk, _ := json.MarshalIndent(rep, "", "  ")
	again, err := htmlreport.Render(onDisk, dir)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem, again) {
		t.Fatal("the page rendered from report.json differs from the one rendered from the report in memory")
	}
}

// BenchmarkRender renders the page of a typical blocked run; the harness
// renders it once per run and the validator once per validation.
func BenchmarkRender(b *testing.B) {
	rep := baseReport(ctoharness.StatusBlocked,
		[]ctoharness.Blocker{{Code: ctoharness.BlockDisallowedChange, Step: ctoharness.StepCollect, Message: "outside"}},
		[]ctoharness.ChangedFile{{Path: "docs/a.md", Change: ctoharness.ChangeAdded, Allowed: true}, {Path: "main.go", Change: ctoharness.ChangeModified}})
	dir := b.TempDir()
	raw, _ := json.Marshal(rep)
	for name, data := range map[string]string{
		"events.normalized.jsonl": events(b, "run_started", "gate_checked", "source_classified", "source_proof_before", "fixture_copied",
			"baseline_committed", "fixture_clean_start", "task_contract_written", "case_process_started", "case.started", "case.log",
			"case.command", "case.file_changed", "case.finished", "case_process_exited", "changes_collected", "run_blocked", "run_finished"),
		"patch.diff": patch, "test.log": strings.Repeat("ok line\n", 300), "task.json": `{"task":"t","allowed_paths":["docs/**"]}`,
	} {
		os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := htmlreport.Render(raw, dir); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRenderCountsProofEntries: the proofs table counts each proof's
// manifest and status entries and shows its HEAD, and marks what differs.
func TestRenderCountsProofEntries(t *testing.T) {
	entry := func(p string) map[string]any {
		return map[string]any{"path": p, "type": "file", "mode": 420, "size": 1, "mtime_ns": 1, "ctime_ns": 1, "inode": 1}
	}
	proof := func(n int, commit string) string {
		var m []any
		for i := range n {
			m = append(m, entry("f"+strings.Repeat("x", i)))
		}
		raw, _ := json.Marshal(map[string]any{"root": "/src", "head": map[string]any{"symbolic_ref": "refs/heads/main", "commit": commit, "tree": "t"},
			"status": []any{map[string]any{"path": "a", "staging": "?", "worktree": "?"}}, "manifest": m, "manifest_digest": "d"})
		return string(raw)
	}
	raw, dir := writeRun(t, baseReport(ctoharness.StatusPass, nil, nil), map[string]string{
		"proofs/source-before.json": proof(3, "c0ffee"), "proofs/source-after.json": proof(4, "c0ffee")})
	page, err := htmlreport.Render(raw, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	for _, want := range []string{`<th>manifest entries</th><td class="mono">3</td><td class="mono">4</td>`,
		`<th>status entries</th><td class="mono">1</td><td class="mono">1</td>`, `<th>HEAD commit</th><td class="mono">c0ffee</td>`, `<tr class="differs"><th>manifest entries`} {
		if !strings.Contains(s, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
