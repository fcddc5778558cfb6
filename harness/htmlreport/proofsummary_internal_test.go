package htmlreport

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
)

// proofText is a source proof as the harness writes it, with n manifest
// entries and a status entry.
func proofText(n int) string {
	var entries []string
	for i := range n {
		entries = append(entries, fmt.Sprintf(`    {
      "path": "d/f%d.go",
      "type": "file",
      "mode": 420,
      "size": %d,
      "mtime_ns": 1,
      "ctime_ns": 2,
      "inode": %d
    }`, i, i*7, 1000+i))
	}
	return `{
  "schema_version": "1.0.0",
  "run_id": "20260102T030405Z-s3-abcd0123",
  "kind": "before",
  "root": "/src",
  "taken_at": "2026-01-02T03:04:05Z",
  "head": {
    "symbolic_ref": "refs/heads/main",
    "commit": "` + strings.Repeat("a", 40) + `",
    "tree": "` + strings.Repeat("b", 40) + `"
  },
  "refs_digest": "` + strings.Repeat("c", 64) + `",
  "ref_count": 2,
  "status_clean": false,
  "status": [
    {
      "path": "x",
      "staging": "M",
      "worktree": " "
    }
  ],
  "status_route": "fast",
  "deep": false,
  "manifest_digest": "` + strings.Repeat("d", 64) + `",
  "manifest": [
` + strings.Join(entries, ",\n") + `
  ]
}
`
}

// TestSummarizeIsUnmarshal holds the counted summary of a proof to what
// json.Unmarshal decodes from the same bytes, on the proof the harness
// writes and on proofs changed as a forger or a broken disk would: keys
// in other cases or twice, arrays that are not arrays of objects, broken
// syntax anywhere, a file cut short. Where the summary gives up, the page
// decodes the whole proof, as it always did.
func TestSummarizeIsUnmarshal(t *testing.T) {
	base := proofText(4)
	changes := []string{base, proofText(0), strings.Replace(proofText(0), `"manifest": [`+"\n\n  ]", `"manifest": []`, 1),
		strings.Replace(base, `"manifest"`, `"Manifest"`, 1), strings.Replace(base, `"status"`, `"ſtatus"`, 1),
		strings.Replace(base, `"status": [`, `"status": null, "status": [`, 1), strings.Replace(base, `"status": [`, `"manifest": [], "status": [`, 1),
		strings.Replace(base, `"manifest": [`, `"manifest": [1, `, 1), strings.Replace(base, `"manifest": [`, `"manifest": [null, `, 1),
		strings.Replace(base, `"ref_count": 2`, `"ref_count": "2"`, 1), strings.Replace(base, `"deep": false,`, ``, 1),
		strings.Replace(base, `"kind"`, `"\u006bind"`, 1), base[:len(base)/2], base + "{}", "[]", ""}
	rng := rand.New(rand.NewSource(3))
	summarized := 0
	for i := range 6000 {
		data := changes[i%len(changes)]
		if i >= len(changes) {
			data = mutate(data, rng)
		}
		sum, ok := summarize([]byte(data))
		if !ok {
			continue
		}
		summarized++
		var want proofSummary
		if err := json.Unmarshal([]byte(data), &want); err != nil {
			t.Fatalf("summarized %q, which json.Unmarshal refuses: %v", data, err)
		}
		if !reflect.DeepEqual(sum, want) {
			t.Fatalf("%q: summarized as\n%+v\njson.Unmarshal gives\n%+v", data, sum, want)
		}
	}
	for _, good := range changes[:3] {
		if _, ok := summarize([]byte(good)); !ok {
			t.Fatalf("the proof as the harness writes it is not summarized:\n%s", good)
		}
	}
	t.Logf("%d of 6000 proofs summarized", summarized)
}

// mutate changes b at one place, with what JSON's grammar turns on.
func mutate(s string, rng *rand.Rand) string {
	pieces := []string{"{", "}", "[", "]", ",", ":", `"`, `\`, " ", "0", "-", ".", "e", "null", "\x00", "\xff", `"manifest":[]`, `{}`}
	at := rng.Intn(len(s) + 1)
	p := pieces[rng.Intn(len(pieces))]
	switch rng.Intn(3) {
	case 0:
		if at < len(s) {
			return s[:at] + p + s[at+1:]
		}
	case 1:
		if at < len(s) {
			return s[:at] + s[at+1:]
		}
	}
	return s[:at] + p + s[at:]
}
