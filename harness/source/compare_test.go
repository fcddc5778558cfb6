package source

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// want is a difference a test expects; empty Before/After match anything.
type want struct {
	path, field, before, after string
}

func hasDiff(nm ctoharness.NonMutationProof, w want) bool {
	for _, d := range nm.Differences {
		if d.Path == w.path && d.Field == w.field &&
			(w.before == "" || d.Before == w.before) && (w.after == "" || d.After == w.after) {
			return true
		}
	}
	return false
}

func TestCompareDetectsMutations(t *testing.T) {
	type env struct {
		repo   Repo
		first  plumbing.Hash // first commit
		second plumbing.Hash // HEAD
		tree1  string
		tree2  string
	}
	tests := []struct {
		name                         string
		mutate                       func(t *testing.T, e env)
		want                         func(e env) []want
		absent                       []want // differences that must not be reported
		head, refs, status, manifest bool   // expected equality flags
		mutated                      bool
	}{
		{
			name:   "nothing changed",
			mutate: func(*testing.T, env) {},
			head:   true, refs: true, status: true, manifest: true,
		},
		{
			name: "file added",
			mutate: func(t *testing.T, e env) {
				writeFile(t, filepath.Join(e.repo.Root, "new.txt"), "new\n")
			},
			want: func(env) []want {
				return []want{
					{path: "new.txt", field: "added", after: "file"},
					{path: ".", field: "ctime_ns"}, // creating a child changes the parent's ctime
					{path: ".", field: "mtime_ns"},
					{path: "new.txt", field: "status", before: "", after: "??"},
				}
			},
			head: true, refs: true, status: false, manifest: false, mutated: true,
		},
		{
			name: "file removed",
			mutate: func(t *testing.T, e env) {
				if err := os.Remove(filepath.Join(e.repo.Root, "sub", "b.txt")); err != nil {
					t.Fatal(err)
				}
			},
			want: func(env) []want {
				return []want{
					{path: "sub/b.txt", field: "removed", before: "file"},
					{path: "sub", field: "ctime_ns"},
					{path: "sub/b.txt", field: "status", before: "", after: " D"},
				}
			},
			head: true, refs: true, status: false, manifest: false, mutated: true,
		},
		{
			name: "content modified with size and mtime preserved",
			mutate: func(t *testing.T, e env) {
				p := filepath.Join(e.repo.Root, "a.txt")
				fi, err := os.Stat(p)
				if err != nil {
					t.Fatal(err)
				}
				writeFile(t, p, "ALPHA\n") // same length as "alpha\n"
				if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
					t.Fatal(err)
				}
			},
			want: func(env) []want {
				return []want{
					{path: "a.txt", field: "ctime_ns"},
					{path: "a.txt", field: "sha256", before: sha("alpha\n"), after: sha("ALPHA\n")},
				}
			},
			absent: []want{{path: "a.txt", field: "size"}, {path: "a.txt", field: "mtime_ns"}, {path: "a.txt", field: "inode"}},
			head:   true, refs: true, manifest: false, mutated: true,
		},
		{
			name: "content modified with size change",
			mutate: func(t *testing.T, e env) {
				writeFile(t, filepath.Join(e.repo.Root, "a.txt"), "alpha, longer\n")
			},
			want: func(env) []want {
				return []want{
					{path: "a.txt", field: "size", before: "6", after: "14"},
					{path: "a.txt", field: "mtime_ns"},
					{path: "a.txt", field: "ctime_ns"},
					{path: "a.txt", field: "sha256"},
					{path: "a.txt", field: "status", before: "", after: " M"},
				}
			},
			head: true, refs: true, status: false, manifest: false, mutated: true,
		},
		{
			name: "chmod",
			mutate: func(t *testing.T, e env) {
				if err := os.Chmod(filepath.Join(e.repo.Root, "a.txt"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: func(env) []want {
				return []want{
					{path: "a.txt", field: "mode", before: "-rw-r--r--", after: "-rw-------"},
					{path: "a.txt", field: "ctime_ns"},
				}
			},
			absent: []want{{path: "a.txt", field: "sha256"}, {path: "a.txt", field: "mtime_ns"}},
			head:   true, refs: true, status: true, manifest: false, mutated: true,
		},
		{
			name: "file replaced by a symlink",
			mutate: func(t *testing.T, e env) {
				p := filepath.Join(e.repo.Root, "a.txt")
				if err := os.Remove(p); err != nil {
					t.Fatal(err)
				}
				symlink(t, "sub/b.txt", p)
			},
			want: func(env) []want {
				return []want{
					{path: "a.txt", field: "type", before: "file", after: "symlink"},
					{path: "a.txt", field: "target", before: "", after: "sub/b.txt"},
					{path: "a.txt", field: "sha256", before: sha("alpha\n"), after: ""},
					{path: "a.txt", field: "status", after: " T"},
				}
			},
			head: true, refs: true, status: false, manifest: false, mutated: true,
		},
		{
			name: "new ref under .git/refs",
			mutate: func(t *testing.T, e env) {
				writeFile(t, filepath.Join(e.repo.GitDir, "refs", "heads", "feature"), e.second.String()+"\n")
			},
			want: func(env) []want {
				return []want{
					{path: ".git/refs/heads/feature", field: "added", after: "file"},
					{path: ".git/refs/heads", field: "ctime_ns"},
					{field: "refs_digest"},
				}
			},
			head: true, refs: false, status: true, manifest: false, mutated: true,
		},
		{
			name: "HEAD moved to the previous commit",
			mutate: func(t *testing.T, e env) {
				writeFile(t, filepath.Join(e.repo.GitDir, "refs", "heads", "main"), e.first.String()+"\n")
			},
			want: func(e env) []want {
				return []want{
					{field: "head.commit", before: e.second.String(), after: e.first.String()},
					{field: "head.tree", before: e.tree2, after: e.tree1},
					{field: "refs_digest"},
					{path: ".git/refs/heads/main", field: "ctime_ns"},
				}
			},
			absent: []want{{field: "head.symbolic_ref"}},
			head:   false, refs: false, status: false, manifest: false, mutated: true,
		},
		{
			name: "HEAD switched to another branch at the same commit",
			mutate: func(t *testing.T, e env) {
				writeFile(t, filepath.Join(e.repo.GitDir, "refs", "heads", "other"), e.second.String()+"\n")
				writeFile(t, filepath.Join(e.repo.GitDir, "HEAD"), "ref: refs/heads/other\n")
			},
			want: func(env) []want {
				return []want{
					{field: "head.symbolic_ref", before: "refs/heads/main", after: "refs/heads/other"},
					{field: "refs_digest"},
					{path: ".git/HEAD", field: "ctime_ns"},
				}
			},
			absent: []want{{field: "head.commit"}, {field: "head.tree"}},
			head:   false, refs: false, status: true, manifest: false, mutated: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			repo, r, first := classified(t, map[string]string{"a.txt": "alpha\n", "sub/b.txt": "bravo\n"})
			second := commitFiles(t, r, repo.Root, map[string]string{"c.txt": "charlie\n"}, "second")
			c1, err := r.CommitObject(first)
			if err != nil {
				t.Fatal(err)
			}
			c2, err := r.CommitObject(second)
			if err != nil {
				t.Fatal(err)
			}
			e := env{repo: repo, first: first, second: second, tree1: c1.TreeHash.String(), tree2: c2.TreeHash.String()}

			before := prove(t, repo, KindBefore, true)
			// Make sure any change lands in a later timestamp than the
			// before-proof on coarse-clock filesystems.
			time.Sleep(10 * time.Millisecond)
			tc.mutate(t, e)
			after := prove(t, repo, KindAfter, true)

			nm := Compare("run-7", before, after)
			// A run holds its before-proof packed: the comparison is the same.
			packed := before
			packed.Pack()
			if pm := Compare("run-7", packed, after); !reflect.DeepEqual(pm, nm) {
				t.Errorf("with the before-proof packed:\n%+v\nunpacked:\n%+v", pm, nm)
			}
			if nm.SchemaVersion != ctoharness.SchemaVersion || nm.RunID != "run-7" {
				t.Errorf("header = %q %q", nm.SchemaVersion, nm.RunID)
			}
			if nm.BeforeDigest != before.ManifestDigest || nm.AfterDigest != after.ManifestDigest {
				t.Error("digests not copied from the proofs")
			}
			got := [4]bool{nm.HeadEqual, nm.RefsEqual, nm.StatusEqual, nm.ManifestEqual}
			exp := [4]bool{tc.head, tc.refs, tc.status, tc.manifest}
			if tc.name == "content modified with size and mtime preserved" {
				exp[2] = nm.StatusEqual // go-git may or may not rehash here; not what this case tests
			}
			if got != exp {
				t.Errorf("head/refs/status/manifest equal = %v, want %v; diffs %+v", got, exp, nm.Differences)
			}
			if nm.Mutated != tc.mutated {
				t.Errorf("mutated = %v, want %v", nm.Mutated, tc.mutated)
			}
			if nm.DifferenceCount != len(nm.Differences) {
				t.Errorf("difference count %d != listed %d", nm.DifferenceCount, len(nm.Differences))
			}
			if !tc.mutated && (nm.DifferenceCount != 0 || nm.Differences == nil || nm.BeforeDigest != nm.AfterDigest) {
				t.Errorf("unchanged source: count %d, differences %v (nil: %v)", nm.DifferenceCount, nm.Differences, nm.Differences == nil)
			}
			if tc.want != nil {
				for _, w := range tc.want(e) {
					if !hasDiff(nm, w) {
						t.Errorf("missing difference %+v in %+v", w, nm.Differences)
					}
				}
			}
			for _, w := range tc.absent {
				if hasDiff(nm, w) {
					t.Errorf("unexpected difference %+v in %+v", w, nm.Differences)
				}
			}
		})
	}
}

func TestCompareCapsDifferences(t *testing.T) {
	var before, after ctoharness.SourceProof
	for i := range 1500 {
		after.Manifest = append(after.Manifest, ctoharness.ManifestEntry{Path: fmt.Sprintf("f%04d", i), Type: ctoharness.EntryFile})
	}
	after.Head.Commit = "c2"
	nm := Compare("r", before, after)
	if nm.DifferenceCount != 1501 {
		t.Errorf("difference count = %d, want 1501", nm.DifferenceCount)
	}
	if len(nm.Differences) != MaxDifferences {
		t.Errorf("listed %d differences, want %d", len(nm.Differences), MaxDifferences)
	}
	if !nm.Mutated || nm.HeadEqual || nm.ManifestEqual || !nm.RefsEqual || !nm.StatusEqual {
		t.Errorf("flags wrong: %+v", nm)
	}
	if d := nm.Differences[0]; d.Field != "head.commit" || d.Before != "" || d.After != "c2" {
		t.Errorf("first difference = %+v, want head.commit", d)
	}
}

func TestCompareUnsortedInput(t *testing.T) {
	e := func(p string, size int64) ctoharness.ManifestEntry {
		return ctoharness.ManifestEntry{Path: p, Type: ctoharness.EntryFile, Size: size}
	}
	before := ctoharness.SourceProof{Manifest: []ctoharness.ManifestEntry{e("b", 1), e("a", 1), e("c", 1)}}
	after := ctoharness.SourceProof{Manifest: []ctoharness.ManifestEntry{e("c", 1), e("a", 2), e("b", 1)}}
	nm := Compare("r", before, after)
	if nm.DifferenceCount != 1 || !hasDiff(nm, want{path: "a", field: "size", before: "1", after: "2"}) {
		t.Fatalf("differences = %+v, want only a's size", nm.Differences)
	}
	packed := before
	packed.Pack()
	if pm := Compare("r", packed, after); pm.DifferenceCount != 1 || !hasDiff(pm, want{path: "a", field: "size", before: "1", after: "2"}) {
		t.Fatalf("packed before: differences = %+v, want only a's size", pm.Differences)
	}
	if before.Manifest[0].Path != "b" {
		t.Fatal("Compare reordered its input")
	}
}

func TestCompareStatus(t *testing.T) {
	st := func(entries ...string) ctoharness.SourceProof {
		p := ctoharness.SourceProof{StatusClean: len(entries) == 0}
		for _, s := range entries {
			p.Status = append(p.Status, ctoharness.StatusEntry{Path: s[2:], Staging: s[:1], Worktree: s[1:2]})
		}
		return p
	}
	tests := []struct {
		name          string
		before, after ctoharness.SourceProof
		want          []want
	}{
		{"equal", st(" Ma"), st(" Ma"), nil},
		{"became dirty", st(), st("??n"), []want{{path: "n", field: "status", after: "??"}}},
		{"became clean", st(" Ma"), st(), []want{{path: "a", field: "status", before: " M"}}},
		{"code changed", st(" Ma"), st("MMa"), []want{{path: "a", field: "status", before: " M", after: "MM"}}},
		{"clean flag alone", ctoharness.SourceProof{StatusClean: true}, ctoharness.SourceProof{}, []want{{field: "status", before: "clean=true", after: "clean=false"}}},
	}
	for _, tc := range tests {
		nm := Compare("r", tc.before, tc.after)
		if nm.StatusEqual != (len(tc.want) == 0) || nm.DifferenceCount != len(tc.want) {
			t.Errorf("%s: status equal %v, %d differences %+v", tc.name, nm.StatusEqual, nm.DifferenceCount, nm.Differences)
		}
		for _, w := range tc.want {
			if !hasDiff(nm, w) {
				t.Errorf("%s: missing %+v in %+v", tc.name, w, nm.Differences)
			}
		}
	}
}

func TestCompareEveryManifestField(t *testing.T) {
	base := ctoharness.ManifestEntry{Path: "p", Type: ctoharness.EntryFile, Mode: 0o644, Size: 1, MtimeNs: 2, CtimeNs: 3, Inode: 4, EntryExtra: &ctoharness.EntryExtra{Digest: "s"}}
	tests := []struct {
		field  string
		change func(e *ctoharness.ManifestEntry)
		before string
		after  string
	}{
		{"type", func(e *ctoharness.ManifestEntry) { e.Type = ctoharness.EntryOther }, "file", "other"},
		{"mode", func(e *ctoharness.ManifestEntry) { e.Mode = 0o755 }, "-rw-r--r--", "-rwxr-xr-x"},
		{"size", func(e *ctoharness.ManifestEntry) { e.Size = 10 }, "1", "10"},
		{"mtime_ns", func(e *ctoharness.ManifestEntry) { e.MtimeNs = 20 }, "2", "20"},
		{"ctime_ns", func(e *ctoharness.ManifestEntry) { e.CtimeNs = 30 }, "3", "30"},
		{"inode", func(e *ctoharness.ManifestEntry) { e.Inode = 40 }, "4", "40"},
		{"target", func(e *ctoharness.ManifestEntry) { e.SetTarget("t") }, "", "t"},
		{"sha256", func(e *ctoharness.ManifestEntry) { e.SetSHA256("z") }, "s", "z"},
	}
	for _, tc := range tests {
		a := base
		tc.change(&a)
		nm := Compare("r", ctoharness.SourceProof{Manifest: []ctoharness.ManifestEntry{base}}, ctoharness.SourceProof{Manifest: []ctoharness.ManifestEntry{a}})
		if nm.DifferenceCount != 1 {
			t.Errorf("%s: %d differences %+v, want 1", tc.field, nm.DifferenceCount, nm.Differences)
			continue
		}
		if d := nm.Differences[0]; d != (ctoharness.Difference{Path: "p", Field: tc.field, Before: tc.before, After: tc.after}) {
			t.Errorf("%s: difference = %+v", tc.field, d)
		}
		if !nm.Mutated || nm.ManifestEqual {
			t.Errorf("%s: not reported as a manifest mutation", tc.field)
		}
	}
}
