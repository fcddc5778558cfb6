package gitstatus

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/caseworld"
)

// loadIgnore loads ignore patterns the way go-git's gitignore.ReadPatterns
// does through the worktree filesystem: per directory its .gitignore, then
// subdirectories in name order, skipping those the patterns gathered so
// far at that level ignore. It works from the manifest instead of a second
// directory walk. As in go-git v5.19 (whose worktree filesystem refuses
// paths through .git), .git/info/exclude is not applied. Unlike go-git, and
// like git since 2.32, a symlinked .gitignore is not followed. It returns
// nil when there are no patterns.
func loadIgnore(root string, manifest []ctoharness.ManifestEntry) (gitignore.Matcher, error) {
	files := make(map[string]bool)
	subdirs := make(map[string][]string)
	for k := range manifest {
		e := &manifest[k]
		p := e.Path
		if !Leaf(e) && e.Type != ctoharness.EntryDir {
			continue
		}
		dir, name := "", p
		if slash := strings.LastIndexByte(p, '/'); slash >= 0 {
			dir, name = p[:slash], p[slash+1:]
		}
		switch {
		case p == ".":
		case e.Type == ctoharness.EntryDir:
			if name != ".git" {
				subdirs[dir] = append(subdirs[dir], name)
			}
		case e.Type == ctoharness.EntryFile && name == ".gitignore":
			files[p] = true
		}
	}
	var load func(dir string, domain []string) ([]gitignore.Pattern, error)
	load = func(dir string, domain []string) ([]gitignore.Pattern, error) {
		prefix := ""
		if dir != "" {
			prefix = dir + "/"
		}
		var ps []gitignore.Pattern
		if f := prefix + ".gitignore"; files[f] {
			data, err := readIgnoreFile(root, f)
			if err != nil {
				return nil, err
			}
			ps = parseIgnore(data, domain)
		}
		kids := subdirs[dir]
		slices.Sort(kids)
		for _, name := range kids {
			sub := append(slices.Clip(domain), name)
			if len(ps) > 0 && gitignore.NewMatcher(ps).Match(sub, true) {
				continue
			}
			more, err := load(prefix+name, sub)
			if err != nil {
				return nil, err
			}
			ps = append(ps, more...)
		}
		return ps, nil
	}
	ps, err := load("", nil)
	if err != nil || len(ps) == 0 {
		return nil, err
	}
	return gitignore.NewMatcher(ps), nil
}

// parseIgnore splits an ignore file into patterns exactly as go-git does:
// every line that is neither blank nor a comment.
func parseIgnore(data []byte, domain []string) []gitignore.Pattern {
	var ps []gitignore.Pattern
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		s := sc.Text()
		if !strings.HasPrefix(s, "#") && len(strings.TrimSpace(s)) > 0 {
			ps = append(ps, gitignore.ParsePattern(s, domain))
		}
	}
	return ps
}

// maxIgnoreFile bounds one .gitignore: the worktree may be Case's, and its
// size must not decide the harness's memory.
const maxIgnoreFile = 4 << 20

// readIgnoreFile reads root/rel confined (no link followed, no FIFO
// opened) and refuses one larger than maxIgnoreFile.
func readIgnoreFile(root, rel string) ([]byte, error) {
	f, err := caseworld.Open(root, rel)
	if err != nil {
		return nil, fmt.Errorf("read ignore file %s: %w", rel, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxIgnoreFile+1))
	if err != nil {
		return nil, fmt.Errorf("read ignore file %s: %w", rel, err)
	}
	if len(data) > maxIgnoreFile {
		return nil, fmt.Errorf("ignore file %s is larger than %d bytes; the harness does not read it", rel, maxIgnoreFile)
	}
	return data, nil
}
