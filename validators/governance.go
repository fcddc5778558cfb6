package validators

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cto-harness/cto-harness/docs"
)

// GovernanceDocs are the documents stage 3 validation requires, relative to
// the harness root.
func GovernanceDocs() []string {
	return []string{"docs/prd/case-stage3-copied-repo.md", "docs/issues/case-stage3.md"}
}

// frontMatterKeys must each be present and non-empty in a governance document.
var frontMatterKeys = []string{"name", "status", "owner", "created", "last_reviewed", "description"}

// CheckGovernanceDoc checks that a document exists and opens with a
// well-formed front-matter block (between "---" lines) naming every key.
func CheckGovernanceDoc(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%s is required for stage 3: %w", path, err)
	}
	defer f.Close()
	return checkFrontMatter(path, f)
}

// checkEmbeddedDoc checks the copy of a document built into the binary.
func checkEmbeddedDoc(doc string) error {
	f, err := docs.Governance.Open(strings.TrimPrefix(doc, "docs/"))
	if err != nil {
		return fmt.Errorf("%s (built in) is required for stage 3: %w", doc, err)
	}
	defer f.Close()
	return checkFrontMatter(doc+" (built in)", f)
}

func checkFrontMatter(path string, r io.Reader) error {
	sc := bufio.NewScanner(r)
	if !sc.Scan() || sc.Text() != "---" {
		return fmt.Errorf("%s must start with a front-matter block opened by a line '---'", path)
	}
	fields := map[string]string{}
	closed := false
	for sc.Scan() {
		line := sc.Text()
		if line == "---" {
			closed = true
			break
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("%s: front-matter line %q is not 'key: value'", path, line)
		}
		fields[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	if !closed {
		return fmt.Errorf("%s: the front-matter block is not closed by a line '---'", path)
	}
	for _, k := range frontMatterKeys {
		if fields[k] == "" {
			return fmt.Errorf("%s: front matter lacks %q", path, k)
		}
	}
	for _, k := range []string{"created", "last_reviewed"} {
		if _, err := time.Parse("2006-01-02", fields[k]); err != nil {
			return fmt.Errorf("%s: %s %q is not a date (YYYY-MM-DD)", path, k, fields[k])
		}
	}
	return nil
}

// governance checks the documents stage 3 requires; false (one is missing
// or malformed) stops the stage before any run.
func (s *stageRun) governance() bool {
	const name = "governance_documents"
	s.check(name)
	// Without a harness root the copies built into the binary are checked,
	// so validation does not depend on the working directory.
	root := s.o.HarnessRoot
	ok := true
	for _, doc := range GovernanceDocs() {
		check := checkEmbeddedDoc(doc)
		if root != "" {
			check = CheckGovernanceDoc(filepath.Join(root, doc))
		}
		if check != nil {
			ok = s.failf(name, check)
		}
	}
	return ok
}
