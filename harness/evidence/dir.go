// Package evidence writes a run's artifact directory: atomic, schema-checked
// JSON artifacts, the hash-chained event log, the trace, and the digests that
// let a validator detect any later change.
package evidence

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// Artifact names, relative to the run directory.
const (
	ReportJSON  = "report.json"
	ReportSum   = "report.sha256"
	ReportMD    = "report.md"
	ReportHTML  = "report.html"
	EventsFile  = "events.normalized.jsonl"
	TraceFile   = "trace.jsonl"
	TaskFile    = "task.json"
	PatchFile   = "patch.diff"
	TestLog     = "test.log"
	SetupLog    = "setup.log"
	HiddenTar   = "hidden-tests.tar" // the task's hidden tests as laid (harness/hidden)
	TestsJSON   = "tests.json"       // per-test results of the task's test report (harness/step/results)
	BaselineLog = "baseline.log"     // the verification run on the baseline, for the fail-to-pass tests (harness/baseline.go)
	WarmUpLog   = "warmup.log"       // the kept build cache's warm-up (harness/keptcache.go)
	// The adversarial step (harness/adversary.go, harness/step/adversary):
	// the adversary's own log, the tests it wrote, and its tests' runs on
	// the baseline and on the result.
	AdversaryLog         = "adversary.log"
	AdversaryTar         = "adversarial-tests.tar"
	AdversaryBaselineLog = "adversarial-baseline.log"
	AdversaryResultLog   = "adversarial-result.log"
	BackendDir           = "backend"
	CaseStdout           = "backend/case.stdout.log"
	CaseStderr           = "backend/case.stderr.log"
	CaseEvents           = "backend/case.events.jsonl"
	SourceBefore         = "proofs/source-before.json"
	SourceAfter          = "proofs/source-after.json"
	NonMutation          = "proofs/source-non-mutation.json"
	CleanStart           = "proofs/fixture-clean-start.json"
	CleanEnd             = "proofs/fixture-clean-end.json"
	FixtureDir           = "fixture"
	// StoreDir is the harness's own git store of the run's commits
	// (package store): the record the patch is re-derived from.
	StoreDir        = "store"
	proofsDir       = "proofs"
	tempPrefix      = ".tmp-"
	digestsExcluded = ReportJSON + "|" + ReportSum
)

// ErrWrite marks any failure to write an artifact; the run must then fail
// closed with ARTIFACT_WRITE_FAILED.
var ErrWrite = errors.New("artifact write failed")

// Dir is one run's artifact directory.
type Dir struct {
	root    string
	schemas *schemas.Set
	tracer  ctoharness.Tracer
	// failAt names an artifact whose write is made to fail; set only by the
	// failure-fixture machinery through WithFault.
	failAt string
	// failNoSpace makes that failure look like a full disk (ENOSPC).
	failNoSpace bool
	sync        Syncer   // nil: Fsync (durable.go)
	made        []string // the runs directory and the parents Create made for it
	// reported is set once the report is written and synced: until then
	// the artifacts are synced all at once before the report (syncRun),
	// after it each write is synced on its own.
	reported bool
}

// Create makes the run directory (which must not exist) and its sub-directories.
func Create(ctx context.Context, root string, set *schemas.Set, tr ctoharness.Tracer) (*Dir, error) {
	made, err := mkdirAll(filepath.Dir(root))
	if err != nil {
		return nil, fmt.Errorf("%w: create runs directory %s: %v", ErrWrite, filepath.Dir(root), err)
	}
	if err := os.Mkdir(root, 0o755); err != nil {
		return nil, fmt.Errorf("%w: create run directory %s: %v", ErrWrite, root, err)
	}
	tr.Trace(ctoharness.TraceMkdir, root)
	for _, sub := range []string{BackendDir, proofsDir} {
		p := filepath.Join(root, sub)
		if err := os.Mkdir(p, 0o755); err != nil {
			return nil, fmt.Errorf("%w: create %s: %v", ErrWrite, p, err)
		}
		tr.Trace(ctoharness.TraceMkdir, p)
	}
	return &Dir{root: root, schemas: set, tracer: tr, made: made}, nil
}

// WithFault makes writes of the named artifact fail. It exists for the
// failure matrix's artifact-write-failure row and is recorded in the report.
func (d *Dir) WithFault(artifact string) { d.failAt = artifact }

// WithNoSpaceFault makes every write of artifact fail as on a full disk.
func (d *Dir) WithNoSpaceFault(artifact string) { d.failAt, d.failNoSpace = artifact, true }

func (d *Dir) injected(p string) error {
	if d.failNoSpace {
		return fmt.Errorf("%w: %s: injected fault (failure fixture): %w", ErrWrite, p, syscall.ENOSPC)
	}
	return fmt.Errorf("%w: %s: injected fault (failure fixture)", ErrWrite, p)
}

// Fault returns the injected fault's artifact name, or "".
func (d *Dir) Fault() string { return d.failAt }

// Root is the run directory path.
func (d *Dir) Root() string { return d.root }

// Path returns the absolute path of an artifact.
func (d *Dir) Path(name string) string { return filepath.Join(d.root, filepath.FromSlash(name)) }

// WriteJSON validates v against kind's schema and writes it atomically.
// Validation comes first so malformed evidence is never written.
func (d *Dir) WriteJSON(ctx context.Context, name string, kind schemas.Kind, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: encode %s: %v", ErrWrite, name, err)
	}
	data = append(data, '\n')
	if err := d.schemas.Validate(kind, data); err != nil {
		return fmt.Errorf("%w: %s would not match its schema: %v", ErrWrite, name, err)
	}
	return d.WriteFile(ctx, name, data)
}

// WriteJSONItems writes doc as WriteJSON writes it, with its top-level
// array key holding n items (item(i) is the i-th), each encoded and
// validated on its own (schemas.Set.ItemWise) and written as it comes: a
// source proof of a million files is never one document in memory. doc
// must encode that array empty ("[]"); the bytes written are those
// WriteJSON would write for the whole document. item is called from
// several goroutines at once and must only read.
func (d *Dir) WriteJSONItems(ctx context.Context, name string, kind schemas.Kind, doc any, key string, n int, item func(i int) any) error {
	head, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: encode %s: %v", ErrWrite, name, err)
	}
	head = append(head, '\n')
	if err := d.schemas.Validate(kind, head); err != nil {
		return fmt.Errorf("%w: %s would not match its schema: %v", ErrWrite, name, err)
	}
	quoted, _ := json.Marshal(key)
	marker := append(append([]byte("\n  "), quoted...), ": []"...)
	at := bytes.Index(head, marker)
	if !d.schemas.ItemWise(kind, key) || at < 0 || bytes.LastIndex(head, marker) != at {
		return fmt.Errorf("%w: %s: %q is not one item-wise array of a %s document encoded empty", ErrWrite, name, key, kind)
	}
	if n == 0 {
		return d.WriteFile(ctx, name, head)
	}
	open := at + len(marker) - 1 // the "]" of "[]"
	return d.WriteStream(ctx, name, func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 64<<10)
		w.Write(head[:open])
		if err := d.writeItems(ctx, w, name, kind, key, n, item); err != nil {
			return err
		}
		w.WriteString("\n  ")
		w.Write(head[open:])
		return w.Flush()
	})
}

// itemChunk is how many items one encoder takes at a time.
const itemChunk = 1024

// writeItems writes the n items, each encoded compact, validated, and laid
// out as MarshalIndent lays out an array's items. Chunks of items are
// encoded side by side, up to the processors, and written in order, a few
// chunks ahead at most: encoding and validation are most of writing a
// large proof, and nothing else of the run goes on meanwhile.
func (d *Dir) writeItems(ctx context.Context, w *bufio.Writer, name string, kind schemas.Kind, key string, n int, item func(i int) any) error {
	encode := func(lo, hi int, out []byte) ([]byte, error) {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrWrite, name, err)
		}
		var compact bytes.Buffer
		enc := json.NewEncoder(&compact)
		for i := lo; i < hi; i++ {
			compact.Reset()
			if err := enc.Encode(item(i)); err != nil {
				return nil, fmt.Errorf("%w: encode %s: %v", ErrWrite, name, err)
			}
			data := bytes.TrimSuffix(compact.Bytes(), []byte("\n"))
			if err := d.schemas.ValidateItem(kind, key, i, data); err != nil {
				return nil, fmt.Errorf("%w: %s would not match its schema: %v", ErrWrite, name, err)
			}
			if i > 0 {
				out = append(out, ',')
			}
			out = appendIndented(append(out, "\n    "...), data, "    ", "  ")
			if i == lo {
				// The chunk's room, from its first item: not grown by
				// doubling item after item.
				out = slices.Grow(out, len(out)*(hi-lo-1)*5/4)
			}
		}
		return out, nil
	}
	workers := min(runtime.GOMAXPROCS(0), 4, (n+itemChunk-1)/itemChunk)
	if workers <= 1 {
		var out []byte
		for lo := 0; lo < n; lo += itemChunk {
			var err error
			if out, err = encode(lo, min(lo+itemChunk, n), out[:0]); err != nil {
				return err
			}
			w.Write(out)
		}
		return nil
	}
	type result struct {
		data []byte
		err  error
	}
	type job struct {
		lo, hi int
		done   chan result
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job)
	ordered := make(chan job, 2*workers) // the chunks in order, as many ahead as this
	free := make(chan []byte, 3*workers) // written chunks' buffers, for the next ones
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				var buf []byte
				select {
				case buf = <-free:
				default:
				}
				data, err := encode(j.lo, j.hi, buf[:0])
				j.done <- result{data, err}
			}
		}()
	}
	go func() {
		defer close(jobs)
		defer close(ordered)
		for lo := 0; lo < n; lo += itemChunk {
			j := job{lo: lo, hi: min(lo+itemChunk, n), done: make(chan result, 1)}
			select {
			case ordered <- j:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				j.done <- result{err: fmt.Errorf("%w: %s: %w", ErrWrite, name, ctx.Err())}
				return
			}
		}
	}()
	var err error
	for j := range ordered {
		r := <-j.done
		if r.err != nil {
			err = r.err
			break
		}
		w.Write(r.data)
		select {
		case free <- r.data:
		default:
		}
	}
	cancel()
	for range ordered { // let the producer end
	}
	wg.Wait()
	return err
}

// WriteFile writes data atomically (a temp file renamed into place): a
// reader never sees a partial artifact. It is made durable with the rest
// before the report (WriteReport), or at once after it.
func (d *Dir) WriteFile(ctx context.Context, name string, data []byte) error {
	d.tracer.Trace(ctoharness.TraceWrite, d.Path(name))
	return d.put(name, data)
}

func (d *Dir) put(name string, data []byte) error {
	p := d.Path(name)
	if d.failAt == name {
		return d.injected(p)
	}
	if err := writeDurable(d.syncer(), p, data, 0o644, d.reported); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrWrite, p, err)
	}
	return nil
}

// WriteStream writes an artifact too large to hold in memory: fill writes
// it to a buffered temp file, which is then renamed into place, as
// WriteFile does. A failure to write the file is ErrWrite; an error of
// fill's own is returned as it is, and no artifact is left.
func (d *Dir) WriteStream(ctx context.Context, name string, fill func(io.Writer) error) error {
	p := d.Path(name)
	d.tracer.Trace(ctoharness.TraceWrite, p)
	if d.failAt == name {
		return d.injected(p)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrWrite, p, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), tempPrefix+filepath.Base(p)+"-*")
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrWrite, p, err)
	}
	tmp := f.Name()
	sw := &stickyWriter{w: f}
	ferr := fill(sw)
	werr := sw.err
	if werr == nil && ferr == nil && d.reported {
		werr = d.syncer()(f)
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr == nil && ferr == nil {
		werr = os.Chmod(tmp, 0o644)
	}
	if werr == nil && ferr == nil {
		werr = os.Rename(tmp, p)
	}
	if werr == nil && ferr == nil && d.reported {
		werr = syncPath(d.syncer(), filepath.Dir(p))
	}
	switch {
	case werr != nil:
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %s: %v", ErrWrite, p, werr)
	case ferr != nil:
		_ = os.Remove(tmp)
		return ferr
	}
	return nil
}

// stickyWriter remembers the first write error, so that WriteStream can
// tell a failing disk from an error of its fill function.
type stickyWriter struct {
	w   io.Writer
	err error
}

func (s *stickyWriter) Write(b []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.w.Write(b)
	s.err = err
	return n, err
}

// OpenAppend opens an artifact for streaming (logs, events, trace).
func (d *Dir) OpenAppend(name string) (*os.File, error) {
	p := d.Path(name)
	d.tracer.Trace(ctoharness.TraceWrite, p)
	if d.failAt == name {
		return nil, d.injected(p)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrWrite, p, err)
	}
	return f, nil
}

// FileSHA256 returns the hex sha256 of a file.
func FileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Digests computes the sha256 of every artifact except report.json and its
// checksum file (which cover themselves) and the fixture tree (which the
// proofs and the patch cover).
func Digests(root string) (map[string]string, error) {
	names, err := ListArtifacts(root)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(names))
	for _, n := range names {
		if strings.Contains("|"+digestsExcluded+"|", "|"+n+"|") {
			continue
		}
		sum, err := FileSHA256(filepath.Join(root, filepath.FromSlash(n)))
		if err != nil {
			return nil, fmt.Errorf("digest %s: %w", n, err)
		}
		out[n] = sum
	}
	return out, nil
}

// ListArtifacts returns every regular file under the run directory, as
// slash paths, except the fixture and the store (git repositories whose
// content the validator checks by re-deriving, not by digest). Anything else (a symlink, a device)
// is reported as an error, since evidence is only ever plain files.
func ListArtifacts(root string) ([]string, error) {
	var names []string
	err := filepath.WalkDir(root, func(p string, de fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if (rel == FixtureDir || rel == StoreDir) && de.IsDir() {
			return filepath.SkipDir
		}
		switch {
		case rel == ".":
			return nil
		case de.IsDir():
			return nil
		case de.Type().IsRegular():
			names = append(names, rel)
			return nil
		default:
			return fmt.Errorf("%s is not a regular file; evidence holds only plain files", rel)
		}
	})
	sort.Strings(names)
	return names, err
}

// WriteReport writes report.md and report.html, makes them and everything
// written before durable (syncRun), computes digests, then writes and
// syncs report.json and its checksum: the report is durable only after
// all it digests. Later writes (the attestation) are synced one by one. The caller fills everything but
// ArtifactDigests, and has already traced these writes: the trace is flushed
// before them because its own digest goes into report.json.
func (d *Dir) WriteReport(ctx context.Context, r *ctoharness.Report, markdown, page []byte) error {
	if err := d.put(ReportMD, markdown); err != nil {
		return err
	}
	if err := d.put(ReportHTML, page); err != nil {
		return err
	}
	if err := d.syncRun(); err != nil {
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	dig, err := Digests(d.root)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	r.ArtifactDigests = dig
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: encode report: %v", ErrWrite, err)
	}
	data = append(data, '\n')
	if err := d.schemas.Validate(schemas.Report, data); err != nil {
		return fmt.Errorf("%w: report.json would not match its schema: %v", ErrWrite, err)
	}
	if err := d.put(ReportJSON, data); err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	if err := d.put(ReportSum, []byte(hex.EncodeToString(sum[:])+"  "+ReportJSON+"\n")); err != nil {
		return err
	}
	if err := syncAll(d.syncer(), []string{d.root, d.Path(ReportJSON), d.Path(ReportSum)}); err != nil {
		return fmt.Errorf("%w: %v", ErrWrite, err)
	}
	d.reported = true
	return nil
}

// FinalArtifacts are written by WriteReport, after the trace is flushed.
func FinalArtifacts() []string { return []string{ReportMD, ReportHTML, ReportJSON, ReportSum} }
