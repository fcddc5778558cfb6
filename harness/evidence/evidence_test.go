package evidence_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

func newDir(t testing.TB) (*evidence.Dir, *evidence.Trace) {
	t.Helper()
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tr := evidence.NewTrace("20261121T000000Z-s1-00000000")
	d, err := evidence.Create(context.Background(), filepath.Join(t.TempDir(), "run"), set, tr)
	if err != nil {
		t.Fatal(err)
	}
	return d, tr
}

func TestWriteJSONRefusesSchemaInvalid(t *testing.T) {
	d, _ := newDir(t)
	err := d.WriteJSON(context.Background(), evidence.TaskFile, schemas.TaskContract, map[string]any{"task": "x"})
	if !errors.Is(err, evidence.ErrWrite) {
		t.Fatalf("err = %v", err)
	}
	if _, err := os.Stat(d.Path(evidence.TaskFile)); err == nil {
		t.Fatal("invalid evidence was written")
	}
	entries, _ := os.ReadDir(d.Root())
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Fatalf("temp file left behind: %s", e.Name())
		}
	}
}

func TestFaultInjection(t *testing.T) {
	d, _ := newDir(t)
	d.WithFault(evidence.PatchFile)
	if err := d.WriteFile(context.Background(), evidence.PatchFile, []byte("x")); !errors.Is(err, evidence.ErrWrite) {
		t.Fatalf("err = %v", err)
	}
	if err := d.WriteFile(context.Background(), evidence.TestLog, []byte("x")); err != nil {
		t.Fatalf("an unrelated write failed: %v", err)
	}
}

func TestEventChain(t *testing.T) {
	d, _ := newDir(t)
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	ev, err := d.OpenEvents("20261121T000000Z-s1-00000000", "nonce", func() time.Time { now = now.Add(time.Millisecond); return now })
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range []ctoharness.EventType{ctoharness.EvRunStarted, ctoharness.EvGateChecked, ctoharness.EvRunFinished} {
		if err := ev.Emit(context.Background(), typ, map[string]any{"k": 1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(d.Path(evidence.EventsFile))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	prev := evidence.GenesisHash("20261121T000000Z-s1-00000000", "nonce")
	for i, l := range lines {
		var e ctoharness.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		if e.Seq != i+1 || e.Prev != prev {
			t.Fatalf("line %d: seq %d prev %s, want %d %s", i+1, e.Seq, e.Prev, i+1, prev)
		}
		prev = evidence.LineHash([]byte(l))
	}
	if prev != ev.Head() || ev.Count() != 3 {
		t.Fatalf("head %s count %d", ev.Head(), ev.Count())
	}
	// An event that does not match the schema is refused, and the log stays refused.
	if err := ev.Emit(context.Background(), "not_an_event", nil); err == nil {
		t.Fatal("an unknown event type was written")
	}
}

func TestDigestsSkipReportAndFixture(t *testing.T) {
	d, _ := newDir(t)
	os.MkdirAll(d.Path("fixture/sub"), 0o755)
	os.WriteFile(d.Path("fixture/sub/file"), []byte("x"), 0o644)
	os.WriteFile(d.Path(evidence.ReportJSON), []byte("{}"), 0o644)
	os.WriteFile(d.Path(evidence.PatchFile), []byte("p"), 0o644)
	dig, err := evidence.Digests(d.Root())
	if err != nil {
		t.Fatal(err)
	}
	if len(dig) != 1 || dig[evidence.PatchFile] == "" {
		t.Fatalf("digests %v", dig)
	}
	os.Symlink("/etc/passwd", d.Path("backend/link"))
	if _, err := evidence.Digests(d.Root()); err == nil {
		t.Fatal("a symlink among the artifacts was accepted")
	}
}

// TestWriteJSONItemsIsWriteJSON holds a source proof written item by item
// to the bytes WriteJSON writes for it whole, and to the same refusal of
// an item its schema does not allow.
func TestWriteJSONItemsIsWriteJSON(t *testing.T) {
	d, _ := newDir(t)
	ctx := context.Background()
	p := ctoharness.SourceProof{SchemaVersion: "1.0.0", RunID: "20261121T000000Z-s1-00000000", Kind: "before", Root: "/src",
		TakenAt: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), Head: ctoharness.HeadState{SymbolicRef: "refs/heads/main", Commit: strings.Repeat("a", 40), Tree: strings.Repeat("b", 40)},
		RefsDigest: strings.Repeat("c", 64), StatusClean: true, Status: []ctoharness.StatusEntry{}, StatusRoute: "fast", ManifestDigest: strings.Repeat("d", 64)}
	for _, n := range []int{0, 1, 3} {
		p.Manifest = []ctoharness.ManifestEntry{
			{Path: ".", Type: ctoharness.EntryDir, Mode: 0o20000000755, Size: 4096, MtimeNs: 1, CtimeNs: 2, Inode: 3},
			{Path: "a <b> & \"c\"\u2028é", Type: ctoharness.EntryFile, Mode: 0o644, Size: 12, Inode: 1 << 63, EntryExtra: &ctoharness.EntryExtra{Digest: strings.Repeat("e", 64)}},
			{Path: "link", Type: ctoharness.EntrySymlink, Mode: 0o1000000777, EntryExtra: &ctoharness.EntryExtra{LinkTarget: "../out\tside"}},
		}[:n]
		if err := d.WriteJSON(ctx, "whole.json", schemas.SourceProof, p); err != nil {
			t.Fatal(err)
		}
		doc := p
		doc.Manifest = []ctoharness.ManifestEntry{}
		if err := d.WriteJSONItems(ctx, "items.json", schemas.SourceProof, doc, "manifest", n, func(i int) any { return &p.Manifest[i] }); err != nil {
			t.Fatal(err)
		}
		whole, _ := os.ReadFile(d.Path("whole.json"))
		items, _ := os.ReadFile(d.Path("items.json"))
		if string(whole) != string(items) {
			t.Errorf("%d entries: WriteJSONItems wrote\n%s\nWriteJSON wrote\n%s", n, items, whole)
		}
	}
	bad := p.Manifest[0]
	bad.Size = -1 // encodes, but the schema's minimum is 0
	doc := p
	doc.Manifest = []ctoharness.ManifestEntry{}
	err := d.WriteJSONItems(ctx, "bad.json", schemas.SourceProof, doc, "manifest", 1, func(int) any { return bad })
	if !errors.Is(err, evidence.ErrWrite) || !strings.Contains(err.Error(), "/manifest/0") {
		t.Fatalf("a manifest entry of a negative size was written or refused without its place: %v", err)
	}
	if _, err := os.Stat(d.Path("bad.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused document was left behind: %v", err)
	}

	// Many items are encoded in chunks side by side: the bytes are still
	// WriteJSON's, and of two bad items the first is the one named.
	var many []ctoharness.ManifestEntry
	for i := range 5000 {
		e := p.Manifest[i%3]
		e.Path = fmt.Sprintf("%s/%d", e.Path, i)
		e.Inode = uint64(i)
		many = append(many, e)
	}
	p.Manifest = many
	if err := d.WriteJSON(ctx, "whole.json", schemas.SourceProof, p); err != nil {
		t.Fatal(err)
	}
	if err := d.WriteJSONItems(ctx, "items.json", schemas.SourceProof, doc, "manifest", len(many), func(i int) any { return &many[i] }); err != nil {
		t.Fatal(err)
	}
	whole, _ := os.ReadFile(d.Path("whole.json"))
	items, _ := os.ReadFile(d.Path("items.json"))
	if string(whole) != string(items) {
		t.Errorf("%d entries: WriteJSONItems wrote %d bytes, WriteJSON %d, and they differ", len(many), len(items), len(whole))
	}
	many[4321].Size, many[2345].Size = -1, -1
	err = d.WriteJSONItems(ctx, "bad.json", schemas.SourceProof, doc, "manifest", len(many), func(i int) any { return &many[i] })
	if !errors.Is(err, evidence.ErrWrite) || !strings.Contains(err.Error(), "/manifest/2345") {
		t.Fatalf("of two bad entries the first was not the one refused: %v", err)
	}
	if _, err := os.Stat(d.Path("bad.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused document was left behind: %v", err)
	}
}
