package schemas

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"math/rand"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// seedFor makes a value the schema node accepts, for the keywords the
// fast checks know: every property present, strings picked from a few
// candidates until one meets the node's pattern and lengths.
func seedFor(t *testing.T, node json.RawMessage, defs map[string]json.RawMessage, rng *rand.Rand) any {
	var m map[string]json.RawMessage
	json.Unmarshal(node, &m)
	if ref, ok := m["$ref"]; ok {
		var s string
		json.Unmarshal(ref, &s)
		return seedFor(t, defs[strings.TrimPrefix(s, "#/$defs/")], defs, rng)
	}
	var typ string
	json.Unmarshal(m["type"], &typ)
	switch typ {
	case "object":
		var props map[string]json.RawMessage
		json.Unmarshal(m["properties"], &props)
		o := map[string]any{}
		for k, p := range props {
			o[k] = seedFor(t, p, defs, rng)
		}
		return o
	case "integer":
		var lo json.Number = "0"
		if b, ok := m["minimum"]; ok {
			lo = json.Number(b)
		}
		return lo
	case "boolean":
		return rng.Intn(2) == 0
	case "string":
		var enum []string
		if json.Unmarshal(m["enum"], &enum) == nil && len(enum) > 0 {
			return enum[rng.Intn(len(enum))]
		}
		var pat string
		json.Unmarshal(m["pattern"], &pat)
		re := regexp.MustCompile(pat)
		for _, c := range []string{"src/a.go", "/abs/path", strings.Repeat("ab", 20), strings.Repeat("0a", 20), strings.Repeat("0a", 32), "TEST_FAILED", "x", "go test ./...", "2026-12-03T00:00:00Z"} {
			if re.MatchString(c) {
				return c
			}
		}
		t.Skipf("no candidate string matches %q", pat)
	}
	t.Fatalf("no seed for type %q", typ)
	return nil
}

// mutate changes one value somewhere in v: a wrong type, a bound passed,
// a key dropped or added, a string emptied or made odd.
func mutate(v any, rng *rand.Rand) any {
	switch x := v.(type) {
	case map[string]any:
		o := map[string]any{}
		keys := make([]string, 0, len(x))
		for k, e := range x {
			o[k] = e
			keys = append(keys, k)
		}
		sort.Strings(keys)
		switch r := rng.Intn(10); {
		case r == 0 && len(keys) > 0:
			delete(o, keys[rng.Intn(len(keys))])
		case r == 1:
			o["unknown_"+fmt.Sprint(rng.Intn(3))] = "x"
		case len(keys) > 0:
			k := keys[rng.Intn(len(keys))]
			o[k] = mutate(o[k], rng)
		default:
			return "not an object"
		}
		return o
	case json.Number:
		return []any{json.Number("-1"), json.Number("-9223372036854775809"), json.Number("18446744073709551616"), json.Number("4294967296"),
			json.Number("1.5"), json.Number("1.0"), json.Number("1e3"), json.Number("0"), "7", true, nil}[rng.Intn(11)]
	case string:
		return []any{"", "A", strings.ToUpper(x), x + "\n", x[:len(x)/2], "é", json.Number("1"), false, nil, []any{x}}[rng.Intn(10)]
	case bool:
		return []any{"true", json.Number("1"), nil}[rng.Intn(3)]
	}
	return nil
}

// mutateBytes changes the encoded value b at one place: a byte replaced,
// inserted or removed, picked from what JSON's grammar turns on.
func mutateBytes(b []byte, rng *rand.Rand) []byte {
	alphabet := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, " ", "\n", "0", "1", "9", "-", "+", ".", "e", "E",
		"t", "n", "a", "\x00", "\x1f", "\xff", "\xc3", "é", `\u00`, `\u0041`, `\"`, "true", "null", "1e3", "1.0"}
	out := append([]byte(nil), b...)
	at := rng.Intn(len(out) + 1)
	piece := alphabet[rng.Intn(len(alphabet))]
	switch r := rng.Intn(3); {
	case r == 0 && at < len(out):
		return append(out[:at], append([]byte(piece), out[at+1:]...)...)
	case r == 1 && at < len(out):
		return append(out[:at], out[at+1:]...)
	}
	return append(out[:at], append([]byte(piece), out[at:]...)...)
}

// acceptedOnlyIfValid fails t when the fast check accepts data that does
// not decode, or that the full validator refuses.
func acceptedOnlyIfValid(t *testing.T, it itemSchema, data []byte) bool {
	t.Helper()
	if !it.fast.accepts(data) {
		return false
	}
	v, err := decode(data)
	if err != nil {
		t.Fatalf("the fast check accepts %q, which is not JSON: %v", data, err)
	}
	if err := it.full.Validate(v); err != nil {
		t.Fatalf("the fast check accepts %s, which the schema refuses: %v", data, err)
	}
	return true
}

// TestFastChecksOnlyAccept holds every array's fast check to the full
// validator: each seed, encoded compact and indented, is accepted by both
// (so the fast path is used), and no mutated item the fast check accepts
// is refused by the full one or is not JSON at all. Items are mutated as
// values (a bound passed, a key dropped or added, a wrong type) and as
// bytes (the grammar broken, escapes and odd bytes put in).
func TestFastChecksOnlyAccept(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, k := range Kinds() {
		for name, it := range s.items[k] {
			if it.fast == nil {
				continue
			}
			t.Run(string(k)+"/"+name, func(t *testing.T) {
				src, _ := fs.ReadFile(files, k.FileName())
				var top struct {
					Defs       map[string]json.RawMessage            `json:"$defs"`
					Properties map[string]map[string]json.RawMessage `json:"properties"`
				}
				json.Unmarshal(src, &top)
				rng := rand.New(rand.NewSource(int64(len(name))))
				seed := seedFor(t, top.Properties[name]["items"], top.Defs, rng)
				if err := it.full.Validate(seed); err != nil {
					t.Fatalf("the seed %v is refused by the schema: %v", seed, err)
				}
				compact, _ := json.Marshal(seed)
				indented, _ := json.MarshalIndent(seed, "    ", "  ")
				for _, data := range [][]byte{compact, indented} {
					if !it.fast.accepts(data) {
						t.Fatalf("the fast check refuses the valid seed %s", data)
					}
				}
				accepted, bytesAccepted := 0, 0
				for range 3000 {
					v := mutate(seed, rng)
					if rng.Intn(3) == 0 {
						v = mutate(v, rng)
					}
					data, err := json.Marshal(v)
					if err != nil {
						continue
					}
					if acceptedOnlyIfValid(t, it, data) {
						accepted++
					}
					if acceptedOnlyIfValid(t, it, mutateBytes([]byte(data), rng)) {
						bytesAccepted++
					}
					if acceptedOnlyIfValid(t, it, mutateBytes(indented, rng)) {
						bytesAccepted++
					}
				}
				t.Logf("%d of 3000 mutated values and %d of 6000 mutated encodings accepted by both", accepted, bytesAccepted)
			})
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("only %d arrays have fast checks", checked)
	}
}

// TestFastManifestBounds: the manifest entry's edges, each decided as the
// schema decides it.
func TestFastManifestBounds(t *testing.T) {
	s, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	it := s.items[SourceProof]["manifest"]
	if it.fast == nil {
		t.Fatal("the source proof's manifest has no fast check")
	}
	base := `{"path":"a/b.go","type":"file","mode":420,"size":3,"mtime_ns":-5,"ctime_ns":7,"inode":%s%s}`
	for _, c := range []struct {
		inode, extra string
		ok           bool
	}{
		{"18446744073709551615", "", true},
		{"18446744073709551616", "", false},
		{"99999999999999999999", "", false},
		{"0", `,"sha256":"` + strings.Repeat("a", 64) + `"`, true},
		{"0", `,"sha256":"` + strings.Repeat("A", 64) + `"`, false},
		{"-0", "", true},
		{"-1", "", false},
		{"-18446744073709551615", "", false},
		{"1", `,"target":""`, false},
		{"1", `,"target":"\u00e9"`, true},
		{"1", `,"object_verified":true`, true},
		{"1", `,"colour":"red"`, false},
		{"1", `,"path":""`, false}, // the decoder keeps the last of a key given twice
		{"1", `,"target":"..\/x\ud800"`, true},
		{"1", `,"type":"FILE"`, false},
		{"1", `,"type":"dir"`, true}, // valid, but a key twice is left to the full validator
	} {
		data := []byte(fmt.Sprintf(base, c.inode, c.extra))
		v, err := decode(data)
		if err != nil {
			t.Fatal(err)
		}
		full := it.full.Validate(v) == nil
		if full != c.ok {
			t.Fatalf("inode %s %s: the schema says %v, the case %v", c.inode, c.extra, full, c.ok)
		}
		if it.fast.accepts(data) && !full {
			t.Fatalf("inode %s %s: the fast check accepts what the schema refuses", c.inode, c.extra)
		}
		if c.ok && !strings.Contains(c.extra, `"type"`) && !it.fast.accepts(data) {
			t.Fatalf("inode %s %s: the fast check refuses a valid entry", c.inode, c.extra)
		}
	}
}
