package ctoharness

// TraceOp is what the harness did with a path or process.
type TraceOp string

// Trace operations. A walk covers every entry below its path.
const (
	TraceStat     TraceOp = "stat"
	TraceReadlink TraceOp = "readlink"
	TraceRead     TraceOp = "read"
	TraceWalk     TraceOp = "walk"
	TraceGitRead  TraceOp = "git_read"
	TraceWrite    TraceOp = "write"
	TraceMkdir    TraceOp = "mkdir"
	TraceRemove   TraceOp = "remove"
	TraceExec     TraceOp = "exec"
)

// AllTraceOps lists every op; the schema enum is checked against it.
func AllTraceOps() []TraceOp {
	return []TraceOp{TraceStat, TraceReadlink, TraceRead, TraceWalk, TraceGitRead, TraceWrite, TraceMkdir, TraceRemove, TraceExec}
}

// IsWrite reports whether op changes the filesystem.
func (op TraceOp) IsWrite() bool {
	return op == TraceWrite || op == TraceMkdir || op == TraceRemove
}

// TraceEntry is one line of trace.jsonl.
type TraceEntry struct {
	Seq   int      `json:"seq"`
	RunID string   `json:"run_id"`
	Op    TraceOp  `json:"op"`
	Path  string   `json:"path"`
	Argv  []string `json:"argv,omitempty"`
	Step  Step     `json:"step"`
}

// Tracer records what the harness touches. Every package that inspects or
// writes a path takes one, so that the trace is complete by construction.
type Tracer interface {
	Trace(op TraceOp, path string)
	TraceExec(argv []string, dir string)
}

// NopTracer discards entries; for tests of packages that do not check the trace.
type NopTracer struct{}

// Trace implements Tracer.
func (NopTracer) Trace(TraceOp, string) {}

// TraceExec implements Tracer.
func (NopTracer) TraceExec([]string, string) {}
