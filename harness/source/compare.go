package source

import (
	"io/fs"
	"iter"
	"slices"
	"strconv"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// MaxDifferences caps the differences listed in a NonMutationProof so a
// mass change cannot blow up the evidence; DifferenceCount keeps the total.
const MaxDifferences = 1000

// Compare diffs two proofs of the same source field by field: HEAD, the refs
// digest, the status and the manifest entry by entry. Any difference means
// the source was mutated. Manifests are expected sorted by path (Prove does
// that); unsorted input is sorted on a copy rather than trusted.
func Compare(runID string, before, after ctoharness.SourceProof) ctoharness.NonMutationProof {
	d := &diffs{list: []ctoharness.Difference{}}
	p := ctoharness.NonMutationProof{
		SchemaVersion: ctoharness.SchemaVersion,
		RunID:         runID,
		BeforeDigest:  before.ManifestDigest,
		AfterDigest:   after.ManifestDigest,
	}

	n := d.count
	d.str("", "head.symbolic_ref", before.Head.SymbolicRef, after.Head.SymbolicRef)
	d.str("", "head.commit", before.Head.Commit, after.Head.Commit)
	d.str("", "head.tree", before.Head.Tree, after.Head.Tree)
	p.HeadEqual = d.count == n

	n = d.count
	d.str("", "refs_digest", before.RefsDigest, after.RefsDigest)
	p.RefsEqual = d.count == n

	n = d.count
	compareStatus(d, before, after)
	p.StatusEqual = d.count == n

	n = d.count
	d.str("", "git_dir", before.GitDir, after.GitDir)
	compareManifest(d, before, after)
	p.ManifestEqual = d.count == n

	p.DifferenceCount = d.count
	p.Differences = d.list
	p.Benign = d.benign
	p.Mutated = !(p.HeadEqual && p.RefsEqual && p.StatusEqual && p.ManifestEqual)
	return p
}

// diffs collects differences, keeping at most MaxDifferences but counting all.
type diffs struct {
	list   []ctoharness.Difference
	count  int
	benign []ctoharness.Difference
}

func (d *diffs) add(path, field, before, after string) {
	d.count++
	if len(d.list) < MaxDifferences {
		d.list = append(d.list, ctoharness.Difference{Path: path, Field: field, Before: before, After: after})
	}
}

func (d *diffs) str(path, field, before, after string) {
	if before != after {
		d.add(path, field, before, after)
	}
}

func (d *diffs) int(path, field string, before, after int64) {
	if before != after {
		d.add(path, field, strconv.FormatInt(before, 10), strconv.FormatInt(after, 10))
	}
}

// compareStatus reports one "status" difference per path whose status
// changed, as the two-letter staging+worktree code ("" when clean).
// A change of StatusClean alone (an inconsistent proof) is reported too.
func compareStatus(d *diffs, before, after ctoharness.SourceProof) {
	n := d.count
	defer func() {
		if d.count == n && before.StatusClean != after.StatusClean {
			d.add("", "status", "clean="+strconv.FormatBool(before.StatusClean), "clean="+strconv.FormatBool(after.StatusClean))
		}
	}()
	b := sortedStatus(before.Status)
	a := sortedStatus(after.Status)
	code := func(e ctoharness.StatusEntry) string { return e.Staging + e.Worktree }
	i, j := 0, 0
	for i < len(b) || j < len(a) {
		switch {
		case j == len(a) || (i < len(b) && b[i].Path < a[j].Path):
			d.add(b[i].Path, "status", code(b[i]), "")
			i++
		case i == len(b) || a[j].Path < b[i].Path:
			d.add(a[j].Path, "status", "", code(a[j]))
			j++
		default:
			d.str(b[i].Path, "status", code(b[i]), code(a[j]))
			i++
			j++
		}
	}
}

// compareManifest merge-joins the two manifests by path.
func compareManifest(d *diffs, before, after ctoharness.SourceProof) {
	a := sortedManifest(after.Entries())
	j := 0
	for b := range inOrder(before) {
		for j < len(a) && a[j].Path < b.Path {
			d.add(a[j].Path, "added", "", a[j].Type.String())
			j++
		}
		if j < len(a) && a[j].Path == b.Path {
			compareEntry(d, &b, &a[j])
			j++
			continue
		}
		d.add(b.Path, "removed", b.Type.String(), "")
	}
	for ; j < len(a); j++ {
		d.add(a[j].Path, "added", "", a[j].Type.String())
	}
}

// inOrder is a proof's manifest in path order, read from its packed form
// when it is held packed (ctoharness.SourceProof.Pack).
func inOrder(p ctoharness.SourceProof) iter.Seq[ctoharness.ManifestEntry] {
	if p.Packed != nil && p.Packed.Sorted() {
		return p.Packed.All()
	}
	return slices.Values(sortedManifest(p.Entries()))
}

func compareEntry(d *diffs, b, a *ctoharness.ManifestEntry) {
	p := b.Path
	if metadataOnly(b, a) && ((a.ObjectVerified && immutableObject.MatchString(p)) || a.SHA256() != "") {
		if len(d.benign) < MaxDifferences {
			d.benign = append(d.benign, ctoharness.Difference{Path: p, Field: "ctime_ns",
				Before: strconv.FormatInt(b.CtimeNs, 10), After: strconv.FormatInt(a.CtimeNs, 10)})
		}
		return
	}
	d.str(p, "type", b.Type.String(), a.Type.String())
	if b.Mode != a.Mode {
		d.add(p, "mode", fs.FileMode(b.Mode).String(), fs.FileMode(a.Mode).String())
	}
	d.int(p, "size", b.Size, a.Size)
	d.int(p, "mtime_ns", b.MtimeNs, a.MtimeNs)
	d.int(p, "ctime_ns", b.CtimeNs, a.CtimeNs)
	if b.Inode != a.Inode {
		d.add(p, "inode", strconv.FormatUint(b.Inode, 10), strconv.FormatUint(a.Inode, 10))
	}
	d.str(p, "target", b.Target(), a.Target())
	d.str(p, "sha256", b.SHA256(), a.SHA256())
}

func sortedManifest(m []ctoharness.ManifestEntry) []ctoharness.ManifestEntry {
	cmp := func(x, y ctoharness.ManifestEntry) int { return strings.Compare(x.Path, y.Path) }
	if slices.IsSortedFunc(m, cmp) {
		return m
	}
	c := slices.Clone(m)
	slices.SortStableFunc(c, cmp)
	return c
}

func sortedStatus(s []ctoharness.StatusEntry) []ctoharness.StatusEntry {
	cmp := func(x, y ctoharness.StatusEntry) int { return strings.Compare(x.Path, y.Path) }
	if slices.IsSortedFunc(s, cmp) {
		return s
	}
	c := slices.Clone(s)
	slices.SortStableFunc(c, cmp)
	return c
}
