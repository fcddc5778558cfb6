package testresults

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
)

// goEvent is one line of `go test -json` (cmd/test2json's TestEvent, plus
// the build events of Go 1.24 and later).
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	ImportPath  string // build-output events
	FailedBuild string // a package-level fail caused by a build failure
}

// goTest is a test that has started and has no verdict yet.
type goTest struct {
	pkg    string
	output strings.Builder
}

// goPackage is what a package's package-level events said.
type goPackage struct {
	output      strings.Builder
	failed      bool
	passed      bool
	failedBuild string
	bad         bool // one of its tests failed or errored
}

type goParser struct {
	results []Result
	open    map[string]*goTest // by ID
	last    map[string]int     // ID -> index in results of its latest verdict
	pkgs    map[string]*goPackage
	build   map[string]*strings.Builder // ImportPath -> build output
}

func parseGoTest(data []byte) ([]Result, error) {
	p := &goParser{
		open:  map[string]*goTest{},
		last:  map[string]int{},
		pkgs:  map[string]*goPackage{},
		build: map[string]*strings.Builder{},
	}
	valid := 0
	for _, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] != '{' {
			continue // plain text, e.g. "# pkg" build errors before Go 1.24
		}
		var e goEvent
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			continue
		}
		valid++
		p.event(&e)
	}
	if valid == 0 {
		return nil, errors.New("testresults: the data is not a `go test -json` stream: it has no test2json event")
	}
	p.end()
	return p.results, nil
}

func (p *goParser) pkg(name string) *goPackage {
	g := p.pkgs[name]
	if g == nil {
		g = &goPackage{}
		p.pkgs[name] = g
	}
	return g
}

func (p *goParser) event(e *goEvent) {
	if e.Action == "build-output" {
		b := p.build[e.ImportPath]
		if b == nil {
			b = &strings.Builder{}
			p.build[e.ImportPath] = b
		}
		b.WriteString(e.Output)
		return
	}
	if e.Test == "" {
		p.packageEvent(e)
		return
	}
	id := e.Test
	if e.Package != "" {
		id = e.Package + "." + e.Test
	}
	switch e.Action {
	case "run":
		if t := p.open[id]; t != nil {
			p.verdict(id, t, Error, 0) // started again before it ended
		}
		p.open[id] = &goTest{pkg: e.Package}
	case "output":
		if t := p.open[id]; t != nil {
			t.output.WriteString(e.Output)
		} else if i, ok := p.last[id]; ok {
			p.results[i].Output += e.Output // printed after its verdict
		} else {
			t := &goTest{pkg: e.Package}
			t.output.WriteString(e.Output)
			p.open[id] = t
		}
	case "pass", "bench", "fail", "skip":
		t := p.open[id]
		if t == nil {
			t = &goTest{pkg: e.Package}
		}
		o := Pass
		switch {
		case e.Action == "skip":
			o = Skip
		case e.Action == "fail" && panicked(t.output.String()):
			o = Error
		case e.Action == "fail":
			o = Fail
		}
		p.verdict(id, t, o, durationMs(e.Elapsed))
	}
}

// panicked reports whether a test's output shows the Go runtime's panic.
func panicked(out string) bool {
	return strings.HasPrefix(out, "panic: ") || strings.Contains(out, "\npanic: ")
}

func (p *goParser) verdict(id string, t *goTest, o Outcome, ms int64) {
	delete(p.open, id)
	if o == Fail || o == Error {
		p.pkg(t.pkg).bad = true
	}
	p.last[id] = len(p.results)
	p.results = append(p.results, Result{ID: id, Outcome: o, DurationMs: ms, Output: t.output.String()})
}

func (p *goParser) packageEvent(e *goEvent) {
	g := p.pkg(e.Package)
	switch e.Action {
	case "output":
		g.output.WriteString(e.Output)
	case "fail":
		g.failed = true
		if e.FailedBuild != "" {
			g.failedBuild = e.FailedBuild
		}
	case "pass":
		g.passed = true
	}
}

// end gives a verdict to tests that never got one and to failed packages
// whose failure no test result shows.
func (p *goParser) end() {
	ids := make([]string, 0, len(p.open))
	for id := range p.open {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := p.open[id]
		o := Error // the binary crashed or timed out while it ran
		if g := p.pkgs[t.pkg]; g != nil && g.passed && !g.failed {
			o = Pass // benchmarks get "run" and no verdict; the binary exited 0
		}
		p.verdict(id, t, o, 0)
	}
	names := make([]string, 0, len(p.pkgs))
	for name := range p.pkgs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		g := p.pkgs[name]
		if !g.failed || g.bad {
			continue
		}
		out := g.output.String()
		if b := p.build[g.failedBuild]; g.failedBuild != "" && b != nil {
			out = joinOutput(b.String(), out)
		}
		id := name
		if id == "" {
			id = "(unnamed package)"
		}
		p.results = append(p.results, Result{ID: id, Outcome: Error, Output: out})
	}
}
