package schemas

import (
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"
)

// embeddedCopy returns the embedded schema files as a writable map.
func embeddedCopy(t *testing.T) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	for _, k := range Kinds() {
		b, err := fs.ReadFile(files, k.FileName())
		if err != nil {
			t.Fatal(err)
		}
		m[k.FileName()] = &fstest.MapFile{Data: b}
	}
	return m
}

func TestCompileErrorsNameTheFile(t *testing.T) {
	if _, err := compileFS(embeddedCopy(t)); err != nil {
		t.Fatalf("embedded copy: %v", err)
	}
	cases := []struct {
		name, file, want string
		edit             func(string) string
	}{
		{"not JSON", "trace.schema.json", "trace.schema.json", func(s string) string { return s[:len(s)/2] }},
		{"bad keyword value", "event.schema.json", "event.schema.json",
			func(s string) string { return strings.Replace(s, `"minimum": 1`, `"minimum": "one"`, 1) }},
		{"bad regex", "config.schema.json", "config.schema.json",
			func(s string) string { return strings.Replace(s, `"pattern": "^/"`, `"pattern": "^(/"`, 1) }},
		{"dangling ref", "report.schema.json", "report.schema.json",
			func(s string) string { return strings.Replace(s, `"#/$defs/Commits"`, `"#/$defs/Nope"`, 1) }},
		{"wrong id", "stage-record.schema.json", "stage-record.schema.json",
			func(s string) string { return strings.Replace(s, "stage-record.schema.json", "record.schema.json", 1) }},
		{"wrong draft", "task-spec.schema.json", "task-spec.schema.json",
			func(s string) string { return strings.Replace(s, "2020-12", "2019-09", 1) }},
		{"stray file", "extra.schema.json", "extra.schema.json", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := embeddedCopy(t)
			if c.edit == nil {
				m[c.file] = &fstest.MapFile{Data: []byte(`{}`)}
			} else {
				src := string(m[c.file].Data)
				out := c.edit(src)
				if out == src {
					t.Fatal("edit changed nothing")
				}
				m[c.file] = &fstest.MapFile{Data: []byte(out)}
			}
			_, err := compileFS(m)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("compileFS = %v, want an error naming %s", err, c.want)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	m := embeddedCopy(t)
	delete(m, "fixture-proof.schema.json")
	if _, err := compileFS(m); err == nil || !strings.Contains(err.Error(), "fixture-proof.schema.json") {
		t.Fatalf("compileFS = %v", err)
	}
}
