package validators

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/evidence"
	"github.com/cto-harness/cto-harness/schemas"
)

// StageRunVerifier is what a stage gate uses to check the run a previous
// stage's record names: the full run validation, now, requiring a pass. It
// returns the run's report so the gate can compare it with the record.
func StageRunVerifier(set *schemas.Set) func(ctx context.Context, runDir string) (ctoharness.Report, error) {
	return func(ctx context.Context, runDir string) (ctoharness.Report, error) {
		res := Run(ctx, runDir, set, RunOptions{ExpectPass: true})
		if !res.OK {
			msgs := make([]string, 0, 3)
			for i, f := range res.Errors {
				if i == 3 {
					msgs = append(msgs, fmt.Sprintf("and %d more", len(res.Errors)-3))
					break
				}
				msgs = append(msgs, f.String())
			}
			return ctoharness.Report{}, fmt.Errorf("%s", strings.Join(msgs, "; "))
		}
		var rep ctoharness.Report
		data, err := os.ReadFile(filepath.Join(runDir, evidence.ReportJSON))
		if err != nil {
			return rep, err
		}
		return rep, json.Unmarshal(data, &rep)
	}
}
