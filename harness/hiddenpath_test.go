package harness_test

import (
	"testing"

	"github.com/cto-harness/cto-harness/harness/config"
)

// Some test suites refuse any file whose absolute path has a segment that
// starts with a dot: express's res.sendFile and express.static tests (the
// send module's dotfiles rule) failed 55 of 1,256 tests, then mocha hung
// until the timeout, only because the verification checkout was under
// RUNS_DIR/.work. Nothing the harness adds to the paths a command works in
// (its directory, TMPDIR, HOME) may start with a dot.
func TestVerificationPathsHaveNoHiddenSegment(t *testing.T) {
	src := recipeRepo(t, map[string]string{
		"check.sh": `for p in "$PWD" "$TMPDIR" "$HOME"; do
  case "$p/" in */.*) echo "hidden segment in $p"; exit 1;; esac
done
echo paths-without-hidden-segments
`,
		"docs/README.md": "notes\n",
	})
	spec := `{"task": "Add a note under docs.", "allowed_paths": ["docs/**"],
  "verification": {"command": "sh check.sh", "timeout_seconds": 60}, "case_timeout_seconds": 60}`
	runRecipe(t, src, spec, config.Config{}, nil, "paths-without-hidden-segments")
}
