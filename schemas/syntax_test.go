package schemas_test

import (
	"errors"
	"testing"

	"github.com/cto-harness/cto-harness/schemas"
)

// TestSyntaxErrorPlace checks that JSON that does not parse is placed by
// line and column (1-based, columns in characters), so a person can find
// the mistake in a config or task file.
func TestSyntaxErrorPlace(t *testing.T) {
	set, err := schemas.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, data string
		line, col  int
		in         string // syn.In("f.json") must equal this
	}{
		{"trailing comma", "{\"owned_sources\": [\n \"/tmp\",\n}\n", 3, 1, "f.json:3:1: not valid JSON: invalid character '}' looking for beginning of value"},
		{"missing colon", "{\"a\" 1}", 1, 6, "f.json:1:6: not valid JSON: invalid character '1' after object key"},
		{"after non-ASCII", "{\"é\": [1,,]}", 1, 10, "f.json:1:10: not valid JSON: invalid character ',' looking for beginning of value"},
		{"truncated", "{\"a\":\n", 2, 1, "f.json:2:1: not valid JSON: unexpected EOF"},
		{"trailing data", "{}\n\n  {}", 3, 3, "f.json:3:3: not valid JSON: trailing data after the JSON value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := set.Validate(schemas.Config, []byte(tc.data))
			var syn *schemas.SyntaxError
			if !errors.As(err, &syn) {
				t.Fatalf("Validate = %v, want a *SyntaxError", err)
			}
			if syn.Line != tc.line || syn.Column != tc.col {
				t.Errorf("place %d:%d, want %d:%d", syn.Line, syn.Column, tc.line, tc.col)
			}
			if got := syn.In("f.json"); got != tc.in {
				t.Errorf("In = %q, want %q", got, tc.in)
			}
		})
	}
	// JSON that parses has no syntax error, only schema problems.
	var syn *schemas.SyntaxError
	if err := set.Validate(schemas.Config, []byte(`{"owned_sources": "x"}`)); err == nil || errors.As(err, &syn) {
		t.Errorf("schema mismatch = %v, want an error without a syntax error", err)
	}
}
