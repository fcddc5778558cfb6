package evidence

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// randomValue is a JSON value of every shape: nested and empty objects
// and arrays, numbers, and strings holding what Marshal escapes.
func randomValue(rng *rand.Rand, depth int) any {
	switch r := rng.Intn(8); {
	case r == 0 && depth < 5:
		m := map[string]any{}
		for range rng.Intn(4) {
			m[randomString(rng)] = randomValue(rng, depth+1)
		}
		return m
	case r == 1 && depth < 5:
		var a []any
		for range rng.Intn(4) {
			a = append(a, randomValue(rng, depth+1))
		}
		return a
	case r == 2:
		return json.Number([]string{"0", "-1", "1.5e-7", "18446744073709551615"}[rng.Intn(4)])
	case r == 3:
		return rng.Intn(2) == 0
	case r == 4:
		return nil
	}
	return randomString(rng)
}

func randomString(rng *rand.Rand) string {
	pieces := []string{"a", " ", ",", ":", "{", "}", "[", "]", `"`, `\`, "\n", "<", "&", "\u2028", "é", "\x01", "\xff", "\\\""}
	var b strings.Builder
	for range rng.Intn(6) {
		b.WriteString(pieces[rng.Intn(len(pieces))])
	}
	return b.String()
}

// TestAppendIndentedIsMarshalIndent holds the fast layout to
// json.MarshalIndent's bytes, with the prefix and indent items are
// written with and with others.
func TestAppendIndentedIsMarshalIndent(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for i := range 20000 {
		v := randomValue(rng, 0)
		compact, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		for _, pi := range [][2]string{{"    ", "  "}, {"", "  "}, {"> ", "\t"}} {
			want, _ := json.MarshalIndent(v, pi[0], pi[1])
			if got := appendIndented(nil, compact, pi[0], pi[1]); !bytes.Equal(got, want) {
				t.Fatalf("value %d with prefix %q: got\n%s\nwant\n%s", i, pi[0], got, want)
			}
		}
	}
}

// FuzzAppendIndented: on any JSON value, laid out compact first, the fast
// layout is json.Indent's.
func FuzzAppendIndented(f *testing.F) {
	for _, s := range []string{`{"a":[1,{},[]],"b":"x\"y\\"}`, `[]`, `"\u2028"`, ` { "k" : [ true , null ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var compact bytes.Buffer
		if json.Compact(&compact, data) != nil {
			return
		}
		var want bytes.Buffer
		if err := json.Indent(&want, compact.Bytes(), "    ", "  "); err != nil {
			t.Fatal(err)
		}
		if got := appendIndented(nil, compact.Bytes(), "    ", "  "); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("%q: got %q, want %q", compact.Bytes(), got, want.Bytes())
		}
	})
}
