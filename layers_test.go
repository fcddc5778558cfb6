package ctoharness_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/cto-harness/cto-harness"

// layerRule is one row of docs/architecture.md's layer table.
type layerRule struct {
	level    int
	name     string
	patterns []string // module-relative; "" is the root package, "x/*" every package below x
}

// readLayers parses the table under "## Layers" in docs/architecture.md.
func readLayers(t *testing.T) []layerRule {
	t.Helper()
	data, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| ([0-9]+) ([a-z]+) \\| ([^|]+) \\|")
	tick := regexp.MustCompile("`([^`]+)`")
	var rules []layerRule
	in := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layers"
			continue
		}
		m := row.FindStringSubmatch(line)
		if !in || m == nil {
			continue
		}
		level, _ := strconv.Atoi(m[1])
		r := layerRule{level: level, name: m[2]}
		for _, p := range tick.FindAllStringSubmatch(m[3], -1) {
			if p[1] == "ctoharness" {
				p[1] = ""
			}
			r.patterns = append(r.patterns, p[1])
		}
		rules = append(rules, r)
	}
	if len(rules) < 5 {
		t.Fatalf("docs/architecture.md: the layer table under '## Layers' has %d rows; the layer test reads it", len(rules))
	}
	return rules
}

// layerOf is the rule whose pattern names pkg most specifically.
func layerOf(rules []layerRule, pkg string) (layerRule, bool) {
	best, bestLen, found := layerRule{}, -1, false
	for _, r := range rules {
		for _, p := range r.patterns {
			n := -1
			switch {
			case strings.HasSuffix(p, "/*"):
				if strings.HasPrefix(pkg, strings.TrimSuffix(p, "*")) {
					n = len(p) - 2
				}
			case p == pkg:
				n = len(p) + 1 // an exact name beats a wildcard of the same length
			}
			if n > bestLen {
				best, bestLen, found = r, n, true
			}
		}
	}
	return best, found
}

// layerViolations lists the imports of graph (package -> module-internal
// imports, module-relative) that break the rules.
func layerViolations(rules []layerRule, graph map[string][]string) []string {
	var out []string
	name := func(p string) string {
		if p == "" {
			return "ctoharness (root)"
		}
		return p
	}
	for pkg, imports := range graph {
		from, ok := layerOf(rules, pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s is in no layer of docs/architecture.md's table: add it to a row", name(pkg)))
			continue
		}
		for _, imp := range imports {
			to, ok := layerOf(rules, imp)
			switch {
			case !ok:
				continue // reported as a package of its own
			case to.level > from.level:
				out = append(out, fmt.Sprintf("%s (layer %d %s) imports %s (layer %d %s): a package imports only from its own layer or below",
					name(pkg), from.level, from.name, name(imp), to.level, to.name))
			case from.name == "step" && to.name == "step":
				out = append(out, fmt.Sprintf("step %s imports step %s: a step gets what another step made from the pipeline, as an input", pkg, imp))
			}
		}
	}
	sort.Strings(out)
	return out
}

// TestLayers holds the module's imports to the layer table.
func TestLayers(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the layer test lists imports with the go command, which is not on PATH")
	}
	rules := readLayers(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	rel := func(p string) (string, bool) {
		if p == modulePath {
			return "", true
		}
		r, ok := strings.CutPrefix(p, modulePath+"/")
		return r, ok
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := rel(f[0])
		if !ok {
			continue
		}
		graph[pkg] = nil
		for _, imp := range f[1:] {
			if r, ok := rel(imp); ok {
				graph[pkg] = append(graph[pkg], r)
			}
		}
	}
	if len(graph) < 20 {
		t.Fatalf("go list named %d packages of the module; want them all", len(graph))
	}
	for _, v := range layerViolations(rules, graph) {
		t.Error(v)
	}
}

// The check itself: an import up a layer, a step importing a step and a
// package in no layer are each reported, by name.
func TestLayerViolationsNamed(t *testing.T) {
	rules := readLayers(t)
	graph := map[string][]string{
		"harness/fixture":    {"harness", "harness/gitstatus"}, // up: leaf -> pipeline
		"harness/step/a":     {"harness/step/b", ""},
		"harness/step/b":     {"harness/source"},
		"elsewhere":          nil,
		"harness":            {"harness/step/a", "validators"}, // up: pipeline -> service
		"cli":                {"harness", "validators"},
		"harness/batch/deep": {"harness/batch", "cli"}, // up: service -> cli
	}
	got := strings.Join(layerViolations(rules, graph), "\n")
	for _, want := range []string{
		"harness/fixture (layer 1 leaf) imports harness (layer 3 pipeline)",
		"step harness/step/a imports step harness/step/b",
		"elsewhere is in no layer",
		"harness (layer 3 pipeline) imports validators (layer 4 service)",
		"harness/batch/deep (layer 4 service) imports cli (layer 5 cli)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("violations do not name %q:\n%s", want, got)
		}
	}
	if n := len(strings.Split(got, "\n")); n != 5 {
		t.Errorf("%d violations, want exactly 5:\n%s", n, got)
	}
}
