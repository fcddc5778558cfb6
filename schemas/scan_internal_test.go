package schemas

import (
	"encoding/json"
	"math/rand"
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
		s := scanner{b: data}
		if !s.skip(0) {
			return false
		}
		s.ws()
		return s.i == len(s.b)
	}
	rng := rand.New(rand.NewSource(7))
	for _, d := range docs {
		if !json.Valid([]byte(d)) || !skips([]byte(d)) {
			t.Fatalf("%s: valid %v, read by the scanner %v", d, json.Valid([]byte(d)), skips([]byte(d)))
		}
		for range 5000 {
			m := []byte(d)
			for range 1 + rng.Intn(3) {
				m = mutateBytes(m, rng)
			}
			if skips(m) && !json.Valid(m) {
				t.Fatalf("the scanner reads %q as one JSON value; encoding/json refuses it", m)
			}
		}
	}
}
