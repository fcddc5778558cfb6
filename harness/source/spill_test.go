package source

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// TestSpillRestored: a proof set aside reads back as the proof it was, as
// often as asked, and leaves its own copy set aside; a file changed in any
// way since (a byte, its length, replaced by a symlink to the same bytes,
// removed) is refused, so an after-proof is never compared with anything
// but the before-proof the run took.
func TestSpillRestored(t *testing.T) {
	repo, _, _ := classified(t, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n"})
	p := prove(t, repo, KindBefore, false)
	want := p.Manifest
	p.Pack()
	if err := Spill(&p, filepath.Join(t.TempDir(), "missing", "before.packed"), ctoharness.NopTracer{}); err == nil {
		t.Fatal("a proof was set aside in a directory that does not exist")
	} else if p.Packed.Where() != "" || !reflect.DeepEqual(p.Entries(), want) {
		t.Fatal("a proof that could not be set aside lost its entries")
	}
	aside := filepath.Join(t.TempDir(), "before.packed")
	if err := Spill(&p, aside, ctoharness.NopTracer{}); err != nil {
		t.Fatal(err)
	}
	if p.Packed.Where() != aside || p.EntryCount() != len(want) {
		t.Fatalf("set aside: where %q, %d entries", p.Packed.Where(), p.EntryCount())
	}
	if err := Spill(&p, aside+"2", ctoharness.NopTracer{}); err == nil {
		t.Fatal("a proof already set aside was set aside again")
	}
	for range 2 {
		back, err := Restored(&p)
		if err != nil {
			t.Fatal(err)
		}
		if got := back.Entries(); !reflect.DeepEqual(got, want) || back.ManifestDigest != p.ManifestDigest {
			t.Fatalf("restored %d entries, want %d", len(got), len(want))
		}
	}
	if p.Packed.Where() != aside {
		t.Fatal("restoring brought the caller's proof back in place")
	}
	good, err := os.ReadFile(aside)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-1] ^= 1
	elsewhere := filepath.Join(t.TempDir(), "same-bytes")
	if err := os.WriteFile(elsewhere, good, 0o600); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func() error{
		"a byte":  func() error { return os.WriteFile(aside, flipped, 0o600) },
		"longer":  func() error { return os.WriteFile(aside, append(append([]byte(nil), good...), 0), 0o600) },
		"symlink": func() error { os.Remove(aside); return os.Symlink(elsewhere, aside) },
		"removed": func() error { return os.Remove(aside) },
	} {
		os.Remove(aside)
		if err := os.WriteFile(aside, good, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := change(); err != nil {
			t.Fatal(err)
		}
		if _, err := Restored(&p); err == nil {
			t.Errorf("%s: a changed file was read back as the proof", name)
		} else if name == "a byte" || name == "longer" {
			if !errors.Is(err, ctoharness.ErrDetachedChanged) {
				t.Errorf("%s: %v, want ErrDetachedChanged", name, err)
			}
		}
	}
	held := prove(t, repo, KindBefore, false)
	if back, err := Restored(&held); err != nil || back != &held {
		t.Fatalf("restoring a proof never set aside: %v", err)
	}
}
