package attest

import (
	"encoding/json"
	"fmt"
	"sort"

	ita1 "github.com/in-toto/attestation/go/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// Predicate types of this project. Each has a JSON Schema in schemas/
// (run-predicate and stage-record-predicate).
const (
	RunPredicateType         = "https://cto-harness.invalid/attestation/run/v1"
	StageRecordPredicateType = "https://cto-harness.invalid/attestation/stage-record/v1"
)

// Subject is one attested file: its name and sha256 (hex).
type Subject struct {
	Name   string
	SHA256 string
}

// Statement is a decoded in-toto Statement v1.
type Statement struct {
	Subjects      []Subject
	PredicateType string
	Predicate     []byte // the predicate object as JSON
}

// NewStatement builds an in-toto Statement v1 with the in-toto Go bindings,
// checks it with their Validate, and encodes it as JSON (protojson). The
// predicate is any JSON-encodable value. Subjects are sorted by name.
func NewStatement(subjects []Subject, predicateType string, predicate any) ([]byte, error) {
	raw, err := json.Marshal(predicate)
	if err != nil {
		return nil, fmt.Errorf("encode the predicate: %w", err)
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, pred); err != nil {
		return nil, fmt.Errorf("the predicate is not a JSON object: %w", err)
	}
	sorted := append([]Subject(nil), subjects...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	st := &ita1.Statement{Type: ita1.StatementTypeUri, PredicateType: predicateType, Predicate: pred}
	for _, s := range sorted {
		st.Subject = append(st.Subject, &ita1.ResourceDescriptor{Name: s.Name, Digest: map[string]string{"sha256": s.SHA256}})
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("the statement is not valid in-toto: %w", err)
	}
	return protojson.Marshal(st)
}

// ParseStatement decodes and validates an in-toto Statement v1 (only v1 is
// accepted). Every subject must carry a sha256 digest.
func ParseStatement(payload []byte) (Statement, error) {
	st := &ita1.Statement{}
	if err := protojson.Unmarshal(payload, st); err != nil {
		return Statement{}, fmt.Errorf("%w: the payload is not an in-toto statement: %v", ErrMalformed, err)
	}
	if err := st.Validate(); err != nil {
		return Statement{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if st.GetType() != ita1.StatementTypeUri {
		return Statement{}, fmt.Errorf("%w: statement type %q, want %q", ErrMalformed, st.GetType(), ita1.StatementTypeUri)
	}
	out := Statement{PredicateType: st.GetPredicateType()}
	seen := map[string]bool{}
	for _, rd := range st.GetSubject() {
		d := rd.GetDigest()["sha256"]
		if d == "" || rd.GetName() == "" {
			return Statement{}, fmt.Errorf("%w: subject %q has no name or no sha256 digest", ErrMalformed, rd.GetName())
		}
		if seen[rd.GetName()] {
			return Statement{}, fmt.Errorf("%w: subject %q is listed twice", ErrMalformed, rd.GetName())
		}
		seen[rd.GetName()] = true
		out.Subjects = append(out.Subjects, Subject{Name: rd.GetName(), SHA256: d})
	}
	pred, err := protojson.Marshal(st.GetPredicate())
	if err != nil {
		return Statement{}, fmt.Errorf("%w: predicate: %v", ErrMalformed, err)
	}
	out.Predicate = pred
	return out, nil
}
