package runlist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// OutsideSource refuses a runs directory inside the source (or its
// symlinked form): a run would then write into the repository it must
// never change.
func OutsideSource(runsDir, src string) error {
	if src == "" {
		return nil
	}
	absSrc, err := filepath.Abs(src)
	if err != nil {
		return fmt.Errorf("source %q: %v", src, err)
	}
	candidates := []string{runsDir}
	if real, err := evalExisting(runsDir); err == nil {
		candidates = append(candidates, real)
	}
	for _, c := range candidates {
		if c == absSrc || strings.HasPrefix(c, absSrc+string(filepath.Separator)) {
			return fmt.Errorf("the runs directory %s is inside the source %s; the harness never writes to a source, so pass --runs-dir outside it", runsDir, absSrc)
		}
	}
	return nil
}

// evalExisting resolves symlinks in the longest existing prefix of p.
func evalExisting(p string) (string, error) {
	rest := ""
	for {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(real, rest), nil
		} else if !errors.Is(err, os.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(p)
		if parent == p {
			return "", os.ErrNotExist
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}
