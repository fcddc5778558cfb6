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

// TestFastChecksOnlyAccept holds every array's fast check to the full
// validator: each seed is accepted by both (so the fast path is used),
// and no mutated item the fast check accepts is refused by the full one.
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
				if !it.fast(seed) {
					t.Fatalf("the fast check refuses the valid seed %v", seed)
				}
				accepted := 0
				for range 3000 {
					v := mutate(seed, rng)
					if rng.Intn(3) == 0 {
						v = mutate(v, rng)
					}
					if !it.fast(v) {
						continue
					}
					accepted++
					if err := it.full.Validate(v); err != nil {
						t.Fatalf("the fast check accepts %#v, which the schema refuses: %v", v, err)
					}
				}
				t.Logf("%d of 3000 mutations accepted by both", accepted)
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
		{"0", `,"sha256":"` + strings.Repeat("a", 64) + `"`, true},
		{"0", `,"sha256":"` + strings.Repeat("A", 64) + `"`, false},
		{"-1", "", false},
		{"1", `,"target":""`, false},
		{"1", `,"object_verified":true`, true},
		{"1", `,"colour":"red"`, false},
	} {
		var v any
		dec := json.NewDecoder(strings.NewReader(fmt.Sprintf(base, c.inode, c.extra)))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		full := it.full.Validate(v) == nil
		if full != c.ok {
			t.Fatalf("inode %s %s: the schema says %v, the case %v", c.inode, c.extra, full, c.ok)
		}
		if it.fast(v) && !full {
			t.Fatalf("inode %s %s: the fast check accepts what the schema refuses", c.inode, c.extra)
		}
		if c.ok && !it.fast(v) {
			t.Fatalf("inode %s %s: the fast check refuses a valid entry", c.inode, c.extra)
		}
	}
}
