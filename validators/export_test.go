package validators_test

import (
	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness"
)

func harnessMarkdown(r *ctoharness.Report) []byte { return harness.Markdown(r) }
