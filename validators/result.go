// Package validators checks evidence: one run directory (Run), and a whole
// stage of the ladder (Stage), which also writes the stage validation record
// the next stage's gate requires.
package validators

import "fmt"

// Finding is one failed check, naming the artifact it concerns.
type Finding struct {
	Check    string `json:"check"`
	Artifact string `json:"artifact"`
	Message  string `json:"message"`
}

func (f Finding) String() string {
	if f.Artifact == "" {
		return fmt.Sprintf("%s: %s", f.Check, f.Message)
	}
	return fmt.Sprintf("%s: %s: %s", f.Check, f.Artifact, f.Message)
}

// Result is the outcome of validating one run directory.
type Result struct {
	RunDir  string    `json:"run_dir"`
	OK      bool      `json:"ok"`
	Status  string    `json:"status"`
	Checked []string  `json:"checked"`
	Errors  []Finding `json:"errors"`
	// Signed: the run carries an attestation; KeyID: the key that signed it;
	// SignatureOK: the signature verified against a trusted key.
	Signed      bool   `json:"signed"`
	KeyID       string `json:"key_id"`
	SignatureOK bool   `json:"signature_ok"`
}

type collector struct {
	res *Result
}

func (c collector) check(name string) { c.res.Checked = append(c.res.Checked, name) }

// maxFindings bounds the findings kept per check: a forged event log can
// break a check on every one of millions of lines, and validation must stay
// in constant memory.
const maxFindings = 50

func (c collector) fail(check, artifact, format string, args ...any) {
	n := 0
	for _, f := range c.res.Errors {
		if f.Check == check {
			n++
		}
	}
	switch {
	case n > maxFindings:
		return
	case n == maxFindings:
		c.res.Errors = append(c.res.Errors, Finding{Check: check, Message: fmt.Sprintf("more than %d findings; the rest are not listed", maxFindings)})
		return
	}
	c.res.Errors = append(c.res.Errors, Finding{Check: check, Artifact: artifact, Message: fmt.Sprintf(format, args...)})
}
