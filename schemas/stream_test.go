package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/schemas"
)

// TestLargeDocumentsValidateItemByItem: a source proof large enough to be
// validated one manifest entry at a time gives the verdict and the
// problems the whole validation gives for the same defect in a small one:
// an entry without its inode, an entry with a key the schema does not
// have, and a rule of the document's own (status_clean with a status
// entry) are each found, at the same pointer.
func TestLargeDocumentsValidateItemByItem(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	small := sourceProof()
	large := sourceProof()
	for i := 0; i < 4000; i++ {
		large.Manifest = append(large.Manifest, ctoharness.ManifestEntry{Path: fmt.Sprintf("d/f%05d.txt", i), Type: ctoharness.EntryFile,
			Mode: 0o100644, Size: 10, MtimeNs: 1, CtimeNs: 2, Inode: uint64(2000 + i)})
	}
	encode := func(p ctoharness.SourceProof, edit func(map[string]any)) []byte {
		data, _ := json.Marshal(p)
		var m map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber() // the inodes need all their digits
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		if edit != nil {
			edit(m)
		}
		out, _ := json.MarshalIndent(m, "", "  ")
		return out
	}
	if n := len(encode(large, nil)); n < 512<<10 {
		t.Fatalf("the large proof is %d bytes; it must be over the item-wise threshold", n)
	}
	entry := func(m map[string]any, i int) map[string]any {
		return m["manifest"].([]any)[i].(map[string]any)
	}
	defects := []struct {
		name string
		edit func(map[string]any)
	}{
		{"no inode", func(m map[string]any) { delete(entry(m, 2), "inode") }},
		{"a key more", func(m map[string]any) { entry(m, 3)["colour"] = "red" }},
		{"a negative size", func(m map[string]any) { entry(m, 1)["size"] = -1 }},
		{"clean with a status", func(m map[string]any) {
			m["status"] = []any{map[string]any{"path": "x", "code": "M"}}
		}},
		{"the manifest is not an array", func(m map[string]any) { m["manifest"] = "none" }},
	}
	if err := set.Validate(schemas.SourceProof, encode(large, nil)); err != nil {
		t.Fatalf("a valid large proof: %v", err)
	}
	for _, d := range defects {
		want := set.Validate(schemas.SourceProof, encode(small, d.edit))
		got := set.Validate(schemas.SourceProof, encode(large, d.edit))
		var wv, gv *schemas.ValidationError
		if !errors.As(want, &wv) || !errors.As(got, &gv) {
			t.Fatalf("%s: small %v, large %v; both must be refused", d.name, want, got)
		}
		if fmt.Sprint(wv.Pointers()) != fmt.Sprint(gv.Pointers()) {
			t.Errorf("%s: the large proof is refused at %v, the small at %v", d.name, gv.Pointers(), wv.Pointers())
		}
	}
	if err := set.Validate(schemas.SourceProof, append(encode(large, nil), []byte(" {}")...)); err == nil {
		t.Error("a large proof with trailing data validated")
	}
}
