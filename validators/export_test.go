package validators_test

import (
	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/reportmd"
)

func harnessMarkdown(r *ctoharness.Report) []byte { return reportmd.Markdown(r) }
