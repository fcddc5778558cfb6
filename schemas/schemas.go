// Package schemas holds the JSON Schemas (draft 2020-12) of every evidence
// artifact cto-harness writes or reads, and validates bytes against them.
//
// There is one schema file per artifact kind, embedded in the binary. Every
// artifact is validated before it is written and again by the validators, so
// a schema is the contract between the writers and the readers; a drift test
// keeps each schema in step with its Go type.
//
// The package holds no mutable state: Compile builds a fresh Set each time.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

//go:embed *.schema.json
var files embed.FS

// Kind names an artifact kind; each has one schema file, <kind>.schema.json.
type Kind string

// Artifact kinds.
const (
	Report       Kind = "report"        // report.json (ctoharness.Report)
	Event        Kind = "event"         // one line of events.normalized.jsonl (ctoharness.Event)
	Trace        Kind = "trace"         // one line of trace.jsonl (ctoharness.TraceEntry)
	SourceProof  Kind = "source-proof"  // proofs/source-{before,after}.json (ctoharness.SourceProof)
	NonMutation  Kind = "non-mutation"  // proofs/source-non-mutation.json (ctoharness.NonMutationProof)
	FixtureProof Kind = "fixture-proof" // proofs/fixture-clean-{start,end}.json (ctoharness.FixtureProof)
	TaskSpec     Kind = "task-spec"     // the user's --task file (task.Spec)
	TaskContract Kind = "task-contract" // task.json (task.Contract)
	Config       Kind = "config"        // the harness configuration (config.Config)
	StageRecord  Kind = "stage-record"  // a stage validation record (gates.Record)
	StageResult  Kind = "stage-result"  // the line printed by validate-case-stage3 --json
	DryRun       Kind = "dry-run"       // the line printed by run --dry-run --json (harness.DryRun)
	CaseEvent    Kind = "case-event"    // one event line Case writes on stdout

	RunPredicate         Kind = "run-predicate"          // the predicate of attestation.dsse.json (attest.RunPredicate)
	StageRecordPredicate Kind = "stage-record-predicate" // the predicate of validation/stage-N.dsse.json (attest.StageRecordPredicate)
	// NetworkRecord is one line of network.jsonl (ctoharness.NetworkRecord).
	NetworkRecord Kind = "network-record"
	BatchSpec     Kind = "batch-spec" // a batch spec file (batch.Spec)
	Batch         Kind = "batch"      // batch.json, a batch's summary (batch.Summary)
	Tests         Kind = "tests"      // tests.json, a run's per-test results (testresults.File)
	TaskCheck     Kind = "task-check" // task-check.json, a task's pre-flight record (ctoharness.TaskCheck)
	Claims        Kind = "claims"     // claims.json, Case's behavioural claims for the adversary (ctoharness.Claims)
)

// Kinds lists every artifact kind; the caller may modify the returned slice.
func Kinds() []Kind {
	return []Kind{Report, Event, Trace, SourceProof, NonMutation, FixtureProof,
		TaskSpec, TaskContract, Config, StageRecord, StageResult, DryRun, CaseEvent, RunPredicate, StageRecordPredicate, NetworkRecord, BatchSpec, Batch, Tests, TaskCheck, Claims}
}

// IDBase prefixes every schema's $id: the $id of kind k is IDBase + k + ".schema.json".
const IDBase = "https://cto-harness.invalid/schemas/"

// FileName is the schema file of kind k.
func (k Kind) FileName() string { return string(k) + ".schema.json" }

// ID is the $id of kind k's schema.
func (k Kind) ID() string { return IDBase + k.FileName() }

func (k Kind) known() bool {
	for _, x := range Kinds() {
		if x == k {
			return true
		}
	}
	return false
}

// Source returns the raw schema file of kind k.
func Source(kind Kind) ([]byte, error) {
	if !kind.known() {
		return nil, unknownKind(kind)
	}
	b, err := files.ReadFile(kind.FileName())
	if err != nil {
		return nil, fmt.Errorf("schema %q: %w", kind, err)
	}
	return b, nil
}

// Set is the compiled schemas of every kind. It is safe for concurrent use.
type Set struct {
	schemas map[Kind]*jsonschema.Schema
	// items are each kind's arrays validated one item at a time in a
	// large document (see itemwise).
	items map[Kind]map[string]itemSchema
}

// Compile compiles every embedded schema with format assertions on. The
// error names the schema file that failed. Each call builds a new Set.
func Compile() (*Set, error) { return compileFS(files) }

// compileFS compiles the schemas found in fsys (the embedded files, or a
// test's broken copy of them).
func compileFS(fsys fs.FS) (*Set, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.LoadURL = func(u string) (io.ReadCloser, error) {
		return nil, fmt.Errorf("schemas never load remote resources (asked for %s)", u)
	}

	embedded, err := fs.Glob(fsys, "*.schema.json")
	if err != nil {
		return nil, fmt.Errorf("list embedded schemas: %w", err)
	}
	want := map[string]bool{}
	for _, k := range Kinds() {
		want[k.FileName()] = true
	}
	for _, name := range embedded {
		if !want[name] {
			return nil, fmt.Errorf("schema file %s: no Kind is named %q", name, strings.TrimSuffix(name, ".schema.json"))
		}
	}

	for _, k := range Kinds() {
		src, err := fs.ReadFile(fsys, k.FileName())
		if err != nil {
			return nil, fmt.Errorf("schema file %s: %w", k.FileName(), err)
		}
		var head struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		if err := json.Unmarshal(src, &head); err != nil {
			return nil, fmt.Errorf("schema file %s: %w", k.FileName(), err)
		}
		if head.ID != k.ID() {
			return nil, fmt.Errorf("schema file %s: $id is %q, want %q", k.FileName(), head.ID, k.ID())
		}
		if head.Schema != "https://json-schema.org/draft/2020-12/schema" {
			return nil, fmt.Errorf("schema file %s: $schema is %q, want draft 2020-12", k.FileName(), head.Schema)
		}
		if err := c.AddResource(k.ID(), bytes.NewReader(src)); err != nil {
			return nil, fmt.Errorf("schema file %s: %w", k.FileName(), err)
		}
	}

	s := &Set{schemas: make(map[Kind]*jsonschema.Schema, len(Kinds())), items: map[Kind]map[string]itemSchema{}}
	for _, k := range Kinds() {
		sch, err := compileOne(c, k)
		if err != nil {
			return nil, fmt.Errorf("schema file %s: %w", k.FileName(), err)
		}
		s.schemas[k] = sch
		src, err := fs.ReadFile(fsys, k.FileName())
		if err == nil {
			s.items[k], err = itemwise(c, k, src)
		}
		if err != nil {
			return nil, fmt.Errorf("schema file %s: its arrays: %w", k.FileName(), err)
		}
	}
	return s, nil
}

// compileOne turns the library's panics on malformed keywords (for example
// an invalid regular expression) into errors.
func compileOne(c *jsonschema.Compiler, k Kind) (sch *jsonschema.Schema, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("compile: %v", r)
		}
	}()
	return c.Compile(k.ID())
}

// Problem is one place where an instance does not match its schema.
type Problem struct {
	Pointer string // JSON pointer into the instance; "" is the whole document
	Message string
	Keyword string // JSON pointer to the failing schema keyword; "" for malformed JSON
}

// String is "pointer: message", plus the schema rule when the failure comes
// from a conditional rule (whose message alone would not explain it).
func (p Problem) String() string {
	ptr := p.Pointer
	if ptr == "" {
		ptr = "(root)"
	}
	s := ptr + ": " + p.Message
	if strings.Contains(p.Keyword, "/then/") || strings.Contains(p.Keyword, "/else/") {
		s += " (by rule #" + p.Keyword + ")"
	}
	return s
}

// ValidationError reports why data does not match the schema of Kind.
type ValidationError struct {
	Kind     Kind
	Problems []Problem // at least one; sorted by pointer
	// Syntax is set when the data is not JSON at all: where it goes wrong,
	// so that a person editing a config or task file can find the place.
	Syntax *SyntaxError
}

// Unwrap gives errors.As the syntax error, when there is one.
func (e *ValidationError) Unwrap() error {
	if e.Syntax == nil {
		return nil
	}
	return e.Syntax
}

// SyntaxError is data that is not JSON: the decoder's complaint and the
// 1-based line and column of the byte it stopped at (for input that ends
// too soon, the end of the input).
type SyntaxError struct {
	Line, Column int
	Err          error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d, column %d: %v", e.Line, e.Column, e.Err)
}

func (e *SyntaxError) Unwrap() error { return e.Err }

// In names the place in file as editors and compilers do,
// "FILE:LINE:COLUMN: not valid JSON: ...", so that it can be jumped to.
func (e *SyntaxError) In(file string) string {
	return fmt.Sprintf("%s:%d:%d: not valid JSON: %v", file, e.Line, e.Column, e.Err)
}

// newSyntaxError places err in data: at a *json.SyntaxError's offset, else
// (a truncated value, trailing data) at the end of the input.
func newSyntaxError(data []byte, err error) *SyntaxError {
	off := int64(len(data))
	var se *json.SyntaxError
	var td trailingData
	switch {
	case errors.As(err, &se) && se.Offset >= 1 && se.Offset <= off:
		off = se.Offset - 1 // the offset counts the bytes read, the bad one included
	case errors.As(err, &td):
		off = td.off
	}
	line, col := 1, 1
	for _, b := range data[:off] {
		switch {
		case b == '\n':
			line, col = line+1, 1
		case b&0xC0 != 0x80: // a UTF-8 continuation byte is not a column of its own
			col++
		}
	}
	return &SyntaxError{Line: line, Column: col, Err: err}
}

func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("%s does not match schema %s: %s", e.Kind, e.Kind.FileName(), strings.Join(parts, "; "))
}

// Pointers lists the distinct JSON pointers of the problems.
func (e *ValidationError) Pointers() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range e.Problems {
		if !seen[p.Pointer] {
			seen[p.Pointer] = true
			out = append(out, p.Pointer)
		}
	}
	return out
}

func unknownKind(k Kind) error {
	return fmt.Errorf("unknown schema kind %q (known: %s)", k, kindList())
}

func kindList() string {
	ks := Kinds()
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Validate decodes data as one JSON value (numbers kept exact) and checks it
// against kind's schema. A mismatch or malformed JSON is a *ValidationError
// naming the kind and the failing JSON pointers.
func (s *Set) Validate(kind Kind, data []byte) error {
	sch, ok := s.schemas[kind]
	if !ok {
		return unknownKind(kind)
	}
	if items := s.items[kind]; len(items) > 0 && len(data) > streamAbove {
		problems, err := validateItemwise(sch, items, data)
		if err == nil && len(problems) == 0 {
			return nil
		}
		if err == nil {
			return &ValidationError{Kind: kind, Problems: problems}
		}
		// Not an object, or not JSON: the whole validation says where.
	}
	v, err := decode(data)
	if err != nil {
		syn := newSyntaxError(data, err)
		return &ValidationError{Kind: kind, Problems: []Problem{{Message: "malformed JSON at " + syn.Error()}}, Syntax: syn}
	}
	err = sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{Kind: kind, Problems: []Problem{{Message: err.Error()}}}
	}
	return &ValidationError{Kind: kind, Problems: leaves(ve)}
}

// Validator returns a function that validates bytes as kind; it suits the
// validate parameters of task.Load, config.Load and gates.RecordCheck.
func (s *Set) Validator(kind Kind) func([]byte) error {
	return func(data []byte) error { return s.Validate(kind, data) }
}

func decode(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty input")
		}
		return nil, err
	}
	end := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		// Placed at the first byte after the value that is not space.
		for end < int64(len(data)) && strings.ContainsRune(" \t\r\n", rune(data[end])) {
			end++
		}
		return nil, trailingData{end}
	}
	return v, nil
}

// trailingData is a second value after the first; off is where it starts.
type trailingData struct{ off int64 }

func (trailingData) Error() string { return "trailing data after the JSON value" }

// leaves flattens the library's error tree into its innermost causes, which
// name the exact instance locations that failed.
func leaves(root *jsonschema.ValidationError) []Problem {
	var out []Problem
	seen := map[Problem]bool{}
	var walk func(*jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			p := Problem{Pointer: e.InstanceLocation, Message: e.Message, Keyword: e.KeywordLocation}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(root)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pointer < out[j].Pointer })
	return out
}
