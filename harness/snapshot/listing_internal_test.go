package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	ctoharness "github.com/cto-harness/cto-harness"
)

// TestEncodeListingIsMarshal holds the streamed listing to the bytes
// json.Marshal gives, which the record's digest and signature name:
// escaped names, symlink targets, hashes, empty and nil listings.
func TestEncodeListingIsMarshal(t *testing.T) {
	full := []ctoharness.ManifestEntry{
		{Path: ".", Type: ctoharness.EntryDir, Mode: 0o20000000755, Size: 4096, MtimeNs: 1, CtimeNs: 2, Inode: 3, Dev: 9, UID: 1000},
		{Path: "a <b> & \"c\"\u2028\x01é", Type: ctoharness.EntryFile, Mode: 0o644, Size: 12, MtimeNs: -5, CtimeNs: 1 << 62, Inode: 1 << 63,
			EntryExtra: &ctoharness.EntryExtra{Digest: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"}},
		{Path: "link", Type: ctoharness.EntrySymlink, Mode: 0o1000000777, EntryExtra: &ctoharness.EntryExtra{LinkTarget: "../out\tside"}, ObjectVerified: true},
	}
	for name, listing := range map[string][]ctoharness.ManifestEntry{"nil": nil, "empty": {}, "one": full[:1], "three": full} {
		want, err := json.Marshal(listing)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		w := bufio.NewWriter(&got)
		var packed *ctoharness.PackedManifest
		if listing != nil {
			packed = ctoharness.PackManifest(listing)
		}
		if err := encodeListing(w, packed); err != nil {
			t.Fatal(err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Errorf("%s: encodeListing wrote\n%s\njson.Marshal gives\n%s", name, got.Bytes(), want)
		}
	}
}
