package ctoharness_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxPipelineFunc is the longest a function of the pipeline or of a step
// may be: a step reads as a few calls, each small enough to test alone.
const maxPipelineFunc = 80

// longFuncs lists the functions of the Go files matched by globs that are
// longer than max lines, as "file:line name (n lines)".
func longFuncs(t *testing.T, max int, globs ...string) []string {
	t.Helper()
	var long []string
	fset := token.NewFileSet()
	for _, g := range globs {
		files, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range file.Decls {
				fn, ok := d.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				if n := end.Line - start.Line + 1; n > max {
					name := fn.Name.Name
					if fn.Recv != nil && len(fn.Recv.List) > 0 {
						name = fmt.Sprintf("(%s).%s", typeName(fn.Recv.List[0].Type), name)
					}
					long = append(long, fmt.Sprintf("%s:%d %s (%d lines)", f, start.Line, name, n))
				}
			}
		}
	}
	sort.Strings(long)
	return long
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return typeName(x.X)
	}
	return "?"
}

// TestPipelineFunctionsShort holds the pipeline (the harness root) and
// every step package to short functions.
func TestPipelineFunctionsShort(t *testing.T) {
	for _, l := range longFuncs(t, maxPipelineFunc, "harness/*.go", "harness/step/*/*.go") {
		t.Errorf("%s: over %d lines; split it into steps that can be tested alone", l, maxPipelineFunc)
	}
}

// TestLongFuncsFound: the length check finds a long function, names it
// with its receiver, and leaves a short one alone.
func TestLongFuncsFound(t *testing.T) {
	dir := t.TempDir()
	body := "package p\n\ntype T struct{}\n\nfunc (t *T) Long() {\n" + strings.Repeat("\t_ = 1\n", 10) + "}\n\nfunc short() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	got := longFuncs(t, 5, filepath.Join(dir, "*.go"))
	if len(got) != 1 || !strings.Contains(got[0], "(*T).Long (12 lines)") || !strings.Contains(got[0], "p.go:5 ") {
		t.Fatalf("long functions %q, want (*T).Long of 12 lines at p.go:5", got)
	}
}
