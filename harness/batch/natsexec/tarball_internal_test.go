package natsexec

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	name, link, body string
	typ              byte
}

func archive(t *testing.T, es ...entry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range es {
		h := &tar.Header{Name: e.name, Typeflag: e.typ, Linkname: e.link, Mode: 0o644, Size: int64(len(e.body))}
		if e.typ != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if e.typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// A worker's archive is hostile: nothing in it may write outside the run's
// directory, through a link, over a file, or as anything but plain files,
// directories and links.
func TestUnpackRefusesHostileArchives(t *testing.T) {
	const id = "20260101T000000Z-s3-abcdef01"
	dir := func(n string) entry { return entry{name: n, typ: tar.TypeDir} }
	file := func(n string) entry { return entry{name: n, typ: tar.TypeReg, body: "x"} }
	for _, c := range []struct {
		name    string
		entries []entry
	}{
		{"absolute name", []entry{dir(id + "/"), file("/tmp/evil")}},
		{"dot-dot", []entry{dir(id + "/"), file(id + "/../evil")}},
		{"outside the run directory", []entry{dir(id + "/"), file("other/evil")}},
		{"through a link", []entry{dir(id + "/"), {name: id + "/l", typ: tar.TypeSymlink, link: "/tmp"}, file(id + "/l/evil")}},
		{"over a file", []entry{dir(id + "/"), file(id + "/a"), file(id + "/a")}},
		{"hard link", []entry{dir(id + "/"), {name: id + "/h", typ: tar.TypeLink, link: "/etc/passwd"}}},
		{"device", []entry{dir(id + "/"), {name: id + "/d", typ: tar.TypeChar}}},
		{"no run directory", []entry{file(id)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dest := filepath.Join(t.TempDir(), "dest")
			_, _, err := unpack(bytes.NewReader(archive(t, c.entries...)), dest, id)
			if !errors.Is(err, ErrUnsafeTar) {
				t.Fatalf("unpack = %v, want ErrUnsafeTar", err)
			}
			if _, err := os.Lstat("/tmp/evil"); err == nil {
				t.Error("/tmp/evil was written")
			}
		})
	}
	if _, _, err := unpack(bytes.NewReader(nil), t.TempDir(), "../x"); !errors.Is(err, ErrUnsafeTar) {
		t.Errorf("a run id that is a path: %v", err)
	}
	// A good archive round-trips, the fixture left out.
	run := filepath.Join(t.TempDir(), id)
	for _, p := range []string{"report.json", "proofs/a.json", "fixture/secret.txt"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(run, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(run, p), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := pack(&b, run); err != nil {
		t.Fatal(err)
	}
	got, _, err := unpack(&b, t.TempDir(), id)
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(filepath.Join(got, "proofs", "a.json")); err != nil || string(data) != "proofs/a.json" {
		t.Errorf("proofs/a.json: %q %v", data, err)
	}
	if _, err := os.Stat(filepath.Join(got, "fixture")); err == nil {
		t.Error("the fixture was packed")
	}
}
