package gitstatus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ParseAlternates reads an objects/info/alternates file: one object
// directory per line, blank lines and "#" comments skipped, as git reads
// it. The harness takes absolute, unquoted paths to a directory named
// objects only: go-git resolves anything else against the wrong
// directory, and git writes such paths (clone --shared, --reference).
func ParseAlternates(data []byte) ([]string, error) {
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || line[0] == '#' {
			continue
		}
		if line[0] == '"' || !filepath.IsAbs(line) || filepath.Base(line) != "objects" {
			return nil, fmt.Errorf("alternate object directory %q is not a plain absolute path to an objects directory", line)
		}
		out = append(out, filepath.Clean(line))
	}
	return out, nil
}

// Alternates lists the alternate object directories of gitDir (nil when
// it borrows none).
func Alternates(gitDir string) ([]string, error) {
	data, err := os.ReadFile(CommonDir(gitDir) + "/objects/info/alternates")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read alternates of %s: %w", gitDir, err)
	}
	return ParseAlternates(data)
}
