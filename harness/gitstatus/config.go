package gitstatus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	ctoharness "github.com/cto-harness/cto-harness"
)

// Config is the merged git configuration a status depends on: system,
// global and repository files (and their includes) in git's order, the
// last value of a key winning. It is read, never written, and nothing it
// names is ever run.
type Config struct {
	vars []configVar
	// Files are the configuration files read, in order.
	Files []string
}

type configVar struct {
	key   string // section[.subsection].name; section and name lower-cased
	value string
	set   bool // "key" without "=" is a boolean true
	file  string
}

// Get returns the last value of key (section and name in lower case).
func (c *Config) Get(key string) (string, bool) {
	for i := len(c.vars) - 1; i >= 0; i-- {
		if c.vars[i].key == key {
			return c.vars[i].value, true
		}
	}
	return "", false
}

// Bool is key as a git boolean; def when unset. A value git would reject
// is an error.
func (c *Config) Bool(key string, def bool) (bool, error) {
	for i := len(c.vars) - 1; i >= 0; i-- {
		v := c.vars[i]
		if v.key != key {
			continue
		}
		if !v.set {
			return true, nil
		}
		switch strings.ToLower(v.value) {
		case "true", "yes", "on", "1":
			return true, nil
		case "false", "no", "off", "0", "":
			return false, nil
		}
		return false, fmt.Errorf("config %s = %q in %s is not a boolean", key, v.value, v.file)
	}
	return def, nil
}

// Keys lists the distinct keys with the given prefix, in first-seen order.
func (c *Config) Keys(prefix string) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range c.vars {
		if strings.HasPrefix(v.key, prefix) && !seen[v.key] {
			seen[v.key] = true
			out = append(out, v.key)
		}
	}
	return out
}

// ConfigEnv is what git's configuration lookup reads from the environment.
type ConfigEnv func(string) string

// homeDir is $HOME, which git uses for "~" and the global files.
func (env ConfigEnv) homeDir() string { return env("HOME") }

// xdgDir is $XDG_CONFIG_HOME/git, or ~/.config/git when it is unset.
func (env ConfigEnv) xdgDir() string {
	if x := env("XDG_CONFIG_HOME"); x != "" {
		return filepath.Join(x, "git")
	}
	if h := env.homeDir(); h != "" {
		return filepath.Join(h, ".config", "git")
	}
	return ""
}

// LoadConfig reads the configuration git would use for the repository at
// gitDir: system, global, then gitDir/config (and gitDir/config.worktree
// when extensions.worktreeConfig is set). head is HEAD's branch name, for
// includeIf "onbranch:".
func LoadConfig(gitDir, head string, env ConfigEnv) (*Config, error) {
	c := &Config{}
	l := &configLoader{c: c, env: env, gitDir: gitDir, head: head}
	if env("GIT_CONFIG_NOSYSTEM") == "" {
		sys := env("GIT_CONFIG_SYSTEM")
		if sys == "" {
			sys = "/etc/gitconfig"
		}
		if err := l.file(sys, 0, true); err != nil {
			return nil, err
		}
	}
	if g := env("GIT_CONFIG_GLOBAL"); g != "" {
		if err := l.file(g, 0, true); err != nil {
			return nil, err
		}
	} else {
		if x := env.xdgDir(); x != "" {
			if err := l.file(filepath.Join(x, "config"), 0, true); err != nil {
				return nil, err
			}
		}
		if h := env.homeDir(); h != "" {
			if err := l.file(filepath.Join(h, ".gitconfig"), 0, true); err != nil {
				return nil, err
			}
		}
	}
	if err := l.file(filepath.Join(gitDir, "config"), 0, true); err != nil {
		return nil, err
	}
	if wt, _ := c.Bool("extensions.worktreeconfig", false); wt {
		if err := l.file(filepath.Join(gitDir, "config.worktree"), 0, true); err != nil {
			return nil, err
		}
	}
	return c, nil
}

type configLoader struct {
	c      *Config
	env    ConfigEnv
	gitDir string
	head   string
}

// file parses one configuration file and the files it includes. A missing
// optional file is skipped, as git does.
func (l *configLoader) file(p string, depth int, optional bool) error {
	if depth > 10 {
		return fmt.Errorf("config include nesting deeper than 10 at %s", p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		if optional && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission)) {
			return nil
		}
		return fmt.Errorf("read git config %s: %w", p, err)
	}
	l.c.Files = append(l.c.Files, p)
	vars, err := parseConfig(data, p)
	if err != nil {
		return err
	}
	for _, v := range vars {
		l.c.vars = append(l.c.vars, v)
		inc, ok, err := l.includePath(v)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if err := l.file(inc, depth+1, true); err != nil {
			return err
		}
	}
	return nil
}

// includePath is the file an include.path or a matching includeIf.*.path
// names, resolved as git resolves it.
func (l *configLoader) includePath(v configVar) (string, bool, error) {
	var cond string
	switch {
	case v.key == "include.path":
	case strings.HasPrefix(v.key, "includeif.") && strings.HasSuffix(v.key, ".path"):
		cond = v.key[len("includeif.") : len(v.key)-len(".path")]
		match, known := l.condition(cond, filepath.Dir(v.file))
		if !known {
			return "", false, refuse(ctoharness.BlockSourceGitFeature,
				"%s sets includeIf %q, a condition the harness does not evaluate; git might read more configuration than the harness would", v.file, cond)
		}
		if !match {
			return "", false, nil
		}
	default:
		return "", false, nil
	}
	if !v.set || v.value == "" {
		return "", false, nil
	}
	p := l.expand(v.value)
	if !filepath.IsAbs(p) {
		p = filepath.Join(filepath.Dir(v.file), p)
	}
	return p, true, nil
}

func (l *configLoader) expand(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		return l.env.homeDir() + p[1:]
	}
	return p
}

// condition evaluates an includeIf condition (gitdir:, gitdir/i:,
// onbranch:); known is false for any other (hasconfig:, or one git may
// add), which the caller refuses rather than guess.
func (l *configLoader) condition(cond, dir string) (match, known bool) {
	gitdir := func(pat string, fold bool) bool {
		switch {
		case strings.HasPrefix(pat, "~/"):
			pat = l.expand(pat)
		case strings.HasPrefix(pat, "./"):
			pat = filepath.Join(dir, pat[2:])
		case !filepath.IsAbs(pat):
			pat = "**/" + pat
		}
		if strings.HasSuffix(pat, "/") {
			pat += "**"
		}
		// git matches the real path of the git directory, then the
		// absolute one.
		cands := []string{l.gitDir}
		if real, err := filepath.EvalSymlinks(l.gitDir); err == nil {
			cands = []string{real, l.gitDir}
		}
		if fold {
			pat = strings.ToLower(pat)
		}
		for _, gd := range cands {
			if fold {
				gd = strings.ToLower(gd)
			}
			if wildmatch(pat, gd, true) {
				return true
			}
		}
		return false
	}
	switch {
	case strings.HasPrefix(cond, "gitdir:"):
		return gitdir(cond[len("gitdir:"):], false), true
	case strings.HasPrefix(cond, "gitdir/i:"):
		return gitdir(cond[len("gitdir/i:"):], true), true
	case strings.HasPrefix(cond, "onbranch:"):
		pat := cond[len("onbranch:"):]
		if strings.HasSuffix(pat, "/") {
			pat += "**"
		}
		return l.head != "" && wildmatch(pat, l.head, true), true
	}
	return false, false
}

// parseConfig parses git's configuration syntax: sections with optional
// quoted subsections (and the legacy [section.sub] form), case-insensitive
// names, quoted values with \n \t \b \" \\ escapes, backslash line
// continuation and # or ; comments.
func parseConfig(data []byte, file string) ([]configVar, error) {
	s := string(data)
	s = strings.TrimPrefix(s, "\xef\xbb\xbf")
	var out []configVar
	section := ""
	line := 1
	i := 0
	bad := func(what string) error {
		return &UnsupportedError{Code: ctoharness.BlockSourceUnreadable, Reason: fmt.Sprintf("bad git config line %d in %s: %s", line, file, what)}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\n':
			line++
			i++
		case c == ' ' || c == '\t' || c == '\r':
			i++
		case c == '#' || c == ';':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '[':
			i++
			start := i
			for i < len(s) && (isKeyChar(s[i]) || s[i] == '.') {
				i++
			}
			name := strings.ToLower(s[start:i])
			if name == "" && (i >= len(s) || s[i] != ' ') {
				return nil, bad("empty section name")
			}
			if i < len(s) && s[i] == ' ' {
				for i < len(s) && s[i] == ' ' {
					i++
				}
				if i >= len(s) || s[i] != '"' {
					return nil, bad("subsection must be quoted")
				}
				i++
				var sub strings.Builder
				for i < len(s) && s[i] != '"' {
					if s[i] == '\n' {
						return nil, bad("newline in subsection")
					}
					if s[i] == '\\' && i+1 < len(s) {
						i++
					}
					sub.WriteByte(s[i])
					i++
				}
				if i >= len(s) {
					return nil, bad("unterminated subsection")
				}
				i++
				name += "." + sub.String()
			} else if dot := strings.IndexByte(name, '.'); dot >= 0 {
				// Legacy [section.subsection]: the subsection is lower-cased.
				name = name[:dot] + "." + strings.ToLower(name[dot+1:])
			}
			if i >= len(s) || s[i] != ']' {
				return nil, bad("unterminated section header")
			}
			i++
			section = name
		case isKeyChar(c):
			if section == "" {
				return nil, bad("key outside a section")
			}
			start := i
			for i < len(s) && isKeyChar(s[i]) {
				i++
			}
			v := configVar{key: section + "." + strings.ToLower(s[start:i]), file: file}
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
			if i < len(s) && s[i] == '=' {
				i++
				v.set = true
				var val string
				var err error
				val, i, line, err = parseValue(s, i, line)
				if err != nil {
					return nil, bad(err.Error())
				}
				v.value = val
			} else if i < len(s) && s[i] != '\n' && s[i] != '\r' && s[i] != '#' && s[i] != ';' {
				return nil, bad("expected '=' after a key")
			}
			out = append(out, v)
		default:
			return nil, bad(fmt.Sprintf("unexpected character %q", c))
		}
	}
	return out, nil
}

func isKeyChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

// parseValue reads a value up to the end of its line, as git's
// parse_value does.
func parseValue(s string, i, line int) (string, int, int, error) {
	var b strings.Builder
	quoted := false
	pendingSpace := 0
	started := false
	for i < len(s) {
		c := s[i]
		i++
		if c == '\n' {
			if quoted {
				return "", i, line, errors.New("newline in a quoted value")
			}
			line++
			break
		}
		if !quoted && (c == ';' || c == '#') {
			for i < len(s) && s[i] != '\n' {
				i++
			}
			continue
		}
		if !quoted && (c == ' ' || c == '\t' || c == '\r') {
			if started {
				pendingSpace++
				b.WriteByte(c)
			}
			continue
		}
		pendingSpace = 0
		started = true
		switch c {
		case '\\':
			if i >= len(s) {
				return "", i, line, errors.New("backslash at the end of the file")
			}
			e := s[i]
			i++
			switch e {
			case '\n':
				line++
				continue // continuation
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case '\\', '"':
				b.WriteByte(e)
			case '\r':
				if i < len(s) && s[i] == '\n' {
					i++
					line++
					continue
				}
				return "", i, line, errors.New("bad escape")
			default:
				return "", i, line, fmt.Errorf("bad escape \\%c", e)
			}
		case '"':
			quoted = !quoted
		default:
			b.WriteByte(c)
		}
	}
	if quoted {
		return "", i, line, errors.New("unterminated quote")
	}
	v := b.String()
	return v[:len(v)-pendingSpace], i, line, nil
}
