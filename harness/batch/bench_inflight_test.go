package batch_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/agent"
	"github.com/cto-harness/cto-harness/harness/batch"
)

// BenchmarkWaitingTrials runs 16 trials of a real coding agent (qwen-code)
// against the scripted model server, whose every answer waits 2 s as a
// hosted model's does, 8 at once, as many as the cores' default and one at
// a time, and reports the ratios (target ≤ 0.2 of serial): trials that
// wait on their model are bounded by its quota, not by the cores. It skips when qwen-code is not installed
// (cto-harness agents install qwen-code).
func BenchmarkWaitingTrials(b *testing.B) {
	s, err := agent.Lookup(string(agent.QwenCode))
	if err != nil {
		b.Fatal(err)
	}
	dir, err := agent.Dir("", os.Getenv)
	if err != nil || !s.Installed(dir) {
		b.Skipf("qwen-code %s is not installed: run cto-harness agents install qwen-code", s.Version)
	}
	w := newWorld(b, 1)
	w.base.Agent.Dir = dir
	task := filepath.Join(b.TempDir(), "note.task.json")
	if err := os.WriteFile(task, []byte(`{"task": "Add docs/CASE_NOTES.md.", "allowed_paths": ["docs/CASE_NOTES.md"], "case_timeout_seconds": 300,
		"verification": {"command": "test -f docs/CASE_NOTES.md", "timeout_seconds": 60}}`), 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(name string, conc int) time.Duration {
		p := w.plan(b, batch.Spec{Name: name, Sources: w.sources, Tasks: []batch.TaskRef{{Name: "note", Spec: task}},
			Agents: []batch.Agent{{Name: "qwen", Kind: string(agent.QwenCode), Model: "scripted-model", Scripted: batch.ScriptedNote, ScriptedLatencyMs: 2000}}, Repeats: 16})
		st, err := batch.OpenStore(w.runs, p.BatchID)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		c, err := batch.Execute(context.Background(), p, st, batch.Local{Base: w.base}, batch.Options{Concurrency: conc})
		if err != nil || c.Done != 16 || c.Failed != 0 {
			b.Fatalf("%s: %+v %v", name, c, err)
		}
		return time.Since(start)
	}
	var serial, cores, parallel time.Duration
	for i := 0; i < b.N; i++ {
		serial += run("serial-"+string(rune('a'+i)), 1)
		cores += run("cores-"+string(rune('a'+i)), batch.DefaultConcurrency())
		parallel += run("eight-"+string(rune('a'+i)), 8)
	}
	ratio := float64(parallel) / float64(serial)
	b.ReportMetric(ratio, "x-serial")
	b.ReportMetric(float64(parallel)/float64(cores), "x-cores-default")
	b.Logf("16 trials: %.1f s one at a time, %.1f s %d at once (the cores' default), %.1f s eight at once: %.2f× serial, %.2f× the cores' default",
		serial.Seconds()/float64(b.N), cores.Seconds()/float64(b.N), batch.DefaultConcurrency(), parallel.Seconds()/float64(b.N), ratio, float64(parallel)/float64(cores))
	if ratio > 0.2 {
		b.Errorf("16 waiting trials 8 at once took %.2f× their serial time; the target is ≤ 0.2×", ratio)
	}
}
