package jsonscan

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// TestScannerReadsOnlyJSON: what the scanner skips as one value is JSON
// by encoding/json's own check, and the JSON it is given unchanged it
// reads to the end, whatever the documents' shapes and escapes.
func TestScannerReadsOnlyJSON(t *testing.T) {
	docs := []string{
		`{"a":[1,-0,2.5e-3,1E+9,true,false,null,"x\"\\\/\b\f\n\r\t\u00e9y"],"b":{},"c":[],"d":{"e":[{"f":""}]}}`,
		` [ 0 , -1.0 , "é" , { "k" : null } ] `,
		`"\ud800"`, `123`, `-0.0e0`, `{"":""}`,
	}
	skips := func(data []byte) bool {
		s := New(data)
		return s.Skip() && s.End()
	}
	rng := rand.New(rand.NewSource(7))
	for _, d := range docs {
		if !json.Valid([]byte(d)) || !skips([]byte(d)) {
			t.Fatalf("%s: valid %v, read by the scanner %v", d, json.Valid([]byte(d)), skips([]byte(d)))
		}
		for range 5000 {
			m := []byte(d)
			for range 1 + rng.Intn(3) {
				m = mutate(m, rng)
			}
			if skips(m) && !json.Valid(m) {
				t.Fatalf("the scanner reads %q as one JSON value; encoding/json refuses it", m)
			}
		}
	}
}

// mutate changes b at one place: a byte replaced, inserted or removed,
// picked from what JSON's grammar turns on.
func mutate(b []byte, rng *rand.Rand) []byte {
	alphabet := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, " ", "\n", "0", "1", "-", "+", ".", "e", "E",
		"t", "n", "\x00", "\x1f", "\xff", "\xc3", `\u00`, `\u0041`, `\"`, "true", "null"}
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

// TestSkipDepth: a value nested past MaxSkipDepth is refused, one at it read.
func TestSkipDepth(t *testing.T) {
	for _, c := range []struct {
		depth int
		ok    bool
	}{{MaxSkipDepth + 1, true}, {MaxSkipDepth + 2, false}} {
		data := []byte(strings.Repeat("[", c.depth) + strings.Repeat("]", c.depth))
		s := New(data)
		if got := s.Skip() && s.End(); got != c.ok {
			t.Errorf("%d levels: read %v, want %v", c.depth, got, c.ok)
		}
	}
}
