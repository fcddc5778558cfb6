package htmlreport

import (
	"path"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/gitquote"
)

// fileView is one changed file: its verdict from the report and its part of patch.diff.
type fileView struct {
	ID      string
	Path    string
	Change  string
	Allowed bool
	Reason  string
	Lang    string
	Lines   []diffLine
	Adds    int
	Dels    int
}

// diffLine is one line of the patch, split into highlighted tokens.
type diffLine struct {
	Kind string // "add", "del", "ctx", "hunk", "meta"
	Toks []tok
}

// files pairs each changed file with its diff. Files the report lists but the
// patch lacks (binary, or the patch was not written) are still shown, and a
// diff for a file the report does not list is shown and marked.
//
// At most ctoharness.MaxFilesShown files are shown (the report's first ones,
// then files only the patch names); more counts the rest, whose diffs are
// skipped.
func files(patch string, changed []ctoharness.ChangedFile) (out []fileView, cut bool, more int) {
	chunks := splitPatch(patch)
	byPath := map[string]int{} // by exact name; -1: listed, not shown
	for i, c := range changed {
		name, ok := c.Name()
		if i >= ctoharness.MaxFilesShown {
			if ok {
				byPath[name] = -1
			}
			more++
			continue
		}
		if ok {
			byPath[name] = len(out)
		}
		out = append(out, fileView{Path: c.Path, Change: string(c.Change), Allowed: c.Allowed, Reason: c.Reason})
	}
	budget := maxDiffLines
	for _, ch := range chunks {
		i, ok := byPath[ch.path]
		if i < 0 {
			continue
		}
		if !ok {
			if len(out) >= ctoharness.MaxFilesShown {
				byPath[ch.path] = -1
				more++
				continue
			}
			byPath[ch.path] = len(out)
			i = len(out)
			shown, _ := ctoharness.PathForms(ch.path)
			out = append(out, fileView{Path: shown, Change: "in patch only", Reason: "not listed in the report's changed_files"})
		}
		f := &out[i]
		f.Lang = language(ch.path)
		for _, l := range ch.lines {
			if budget == 0 {
				cut = true
				break
			}
			budget--
			f.Lines = append(f.Lines, classify(l, f.Lang))
			switch {
			case strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++"):
				f.Adds++
			case strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---"):
				f.Dels++
			}
		}
	}
	for i := range out {
		out[i].ID = "file-" + itoa(i+1)
	}
	return out, cut, more
}

type chunk struct {
	path  string
	lines []string
}

func splitPatch(patch string) []chunk {
	var out []chunk
	for _, l := range lines(patch) {
		if strings.HasPrefix(l, "diff --git ") || len(out) == 0 {
			out = append(out, chunk{path: patchPath(l)})
		}
		c := &out[len(out)-1]
		for _, pre := range []string{"+++ ", "--- "} {
			if p, ok := strings.CutPrefix(l, pre); ok && c.path == "" {
				if name, err := gitquote.Name(p); err == nil && name != "/dev/null" {
					c.path = trimSide(name)
				}
			}
		}
		c.lines = append(c.lines, l)
	}
	return out
}

// patchPath reads the path from "diff --git a/P b/P", plain or C-quoted
// (the two are equal: no renames).
func patchPath(header string) string {
	a, b, err := gitquote.DiffHeader(header)
	if err != nil {
		return ""
	}
	if b != "" {
		return trimSide(b)
	}
	return trimSide(a)
}

// trimSide drops the a/ or b/ of a patch name.
func trimSide(p string) string {
	for _, pre := range []string{"a/", "b/"} {
		if q, ok := strings.CutPrefix(p, pre); ok {
			return q
		}
	}
	return p
}

func classify(l, lang string) diffLine {
	switch {
	case strings.HasPrefix(l, "@@"):
		return diffLine{Kind: "hunk", Toks: []tok{{"", l}}}
	case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"), strings.HasPrefix(l, "diff --git"),
		strings.HasPrefix(l, "index "), strings.HasPrefix(l, "new file"), strings.HasPrefix(l, "deleted file"),
		strings.HasPrefix(l, "old mode"), strings.HasPrefix(l, "new mode"), strings.HasPrefix(l, "Binary files"),
		strings.HasPrefix(l, `\ No newline`):
		return diffLine{Kind: "meta", Toks: []tok{{"", l}}}
	case strings.HasPrefix(l, "+"):
		return diffLine{Kind: "add", Toks: append([]tok{{"mark", "+"}}, highlight(l[1:], lang)...)}
	case strings.HasPrefix(l, "-"):
		return diffLine{Kind: "del", Toks: append([]tok{{"mark", "-"}}, highlight(l[1:], lang)...)}
	case strings.HasPrefix(l, " "):
		return diffLine{Kind: "ctx", Toks: append([]tok{{"mark", " "}}, highlight(l[1:], lang)...)}
	}
	return diffLine{Kind: "meta", Toks: []tok{{"", l}}}
}

func language(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".go":
		return "go"
	case ".py":
		return "python"
	case ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx":
		return "js"
	case ".sh", ".bash":
		return "shell"
	case ".json":
		return "json"
	case ".md", ".markdown":
		return "markdown"
	case ".c", ".h", ".cc", ".cpp", ".rs", ".java":
		return "c"
	case ".yaml", ".yml", ".toml":
		return "config"
	}
	switch path.Base(p) {
	case "Makefile", "Dockerfile":
		return "shell"
	}
	return "text"
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}
