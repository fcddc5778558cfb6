package gitstatus

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
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
		b, ok := parseBool(v.value)
		if !ok {
			return false, fmt.Errorf("config %s = %q in %s is not a boolean", key, v.value, v.file)
		}
		return b, nil
	}
	return def, nil
}

// parseBool is git's git_parse_maybe_bool: true/yes/on, false/no/off or
// empty, or an integer (with an optional k, m or g unit), true when not
// zero.
func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "yes", "on":
		return true, true
	case "false", "no", "off", "":
		return false, true
	}
	n := strings.TrimRight(strings.ToLower(s), "kmg")
	if len(s)-len(n) > 1 {
		return false, false
	}
	v, err := strconv.ParseInt(n, 0, 64)
	if err != nil {
		return false, false
	}
	return v != 0, true
}

// envBool is git's git_env_bool: an unset variable is def, a set one must
// be a boolean, or git refuses to run. An empty value reads as false in
// git and as unset here; every caller's def is false.
func envBool(env ConfigEnv, name string, def bool) (bool, error) {
	v := env(name)
	if v == "" {
		return def, nil
	}
	b, ok := parseBool(v)
	if !ok {
		return false, refuse(ctoharness.BlockSourceUnreadable,
			"%s=%q is not a boolean, so git refuses to run; unset it or set it to true or false", name, v)
	}
	return b, nil
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
// when extensions.worktreeConfig is set), then the command-line settings
// git takes from the environment (GIT_CONFIG_COUNT with GIT_CONFIG_KEY_n
// and GIT_CONFIG_VALUE_n, then GIT_CONFIG_PARAMETERS). head is HEAD's
// branch name, for includeIf "onbranch:".
//
// includeIf "hasconfig:remote.*.url:" is evaluated as git does: the remote
// URLs of the whole configuration are collected first (the files such a
// condition includes may not set any), then the conditions are matched
// against them.
func LoadConfig(gitDir, head string, env ConfigEnv) (*Config, error) {
	l := &configLoader{c: &Config{}, env: env, gitDir: gitDir, head: head}
	if err := l.load(); err != nil {
		return nil, err
	}
	if !l.hasconfig {
		return l.c, nil
	}
	var urls []string
	for _, v := range l.c.vars {
		if isRemoteURL(v.key) && v.set {
			urls = append(urls, v.value)
		}
	}
	l = &configLoader{c: &Config{}, env: env, gitDir: gitDir, head: head, urls: urls, urlsKnown: true}
	if err := l.load(); err != nil {
		return nil, err
	}
	return l.c, nil
}

// isRemoteURL reports whether key is remote.<name>.url.
func isRemoteURL(key string) bool {
	return strings.HasPrefix(key, "remote.") && strings.HasSuffix(key, ".url") && len(key) > len("remote..url")
}

// load reads every configuration source in git's order.
func (l *configLoader) load() error {
	nosys, err := envBool(l.env, "GIT_CONFIG_NOSYSTEM", false)
	if err != nil {
		return err
	}
	if !nosys {
		sys := l.env("GIT_CONFIG_SYSTEM")
		if sys == "" {
			sys = "/etc/gitconfig"
		}
		if err := l.file(sys, 0, true); err != nil {
			return err
		}
	}
	if g := l.env("GIT_CONFIG_GLOBAL"); g != "" {
		if err := l.file(g, 0, true); err != nil {
			return err
		}
	} else {
		if x := l.env.xdgDir(); x != "" {
			if err := l.file(filepath.Join(x, "config"), 0, true); err != nil {
				return err
			}
		}
		if h := l.env.homeDir(); h != "" {
			if err := l.file(filepath.Join(h, ".gitconfig"), 0, true); err != nil {
				return err
			}
		}
	}
	if err := l.file(filepath.Join(CommonDir(l.gitDir), "config"), 0, true); err != nil {
		return err
	}
	if wt, _ := l.c.Bool("extensions.worktreeconfig", false); wt {
		if err := l.file(filepath.Join(l.gitDir, "config.worktree"), 0, true); err != nil {
			return err
		}
	}
	vars, err := envConfig(l.env)
	if err != nil {
		return err
	}
	return l.add(vars, 0)
}

// envConfig is the configuration git takes from its environment, in its
// order: GIT_CONFIG_COUNT pairs, then GIT_CONFIG_PARAMETERS (what `git -c`
// passes to the commands it runs). What git would refuse is refused.
func envConfig(env ConfigEnv) ([]configVar, error) {
	var out []configVar
	bad := func(format string, args ...any) error {
		return refuse(ctoharness.BlockSourceUnreadable, "git would refuse its configuration from the environment: "+format, args...)
	}
	if c := env("GIT_CONFIG_COUNT"); c != "" {
		n, err := strconv.ParseUint(c, 10, 31)
		if err != nil {
			return nil, bad("GIT_CONFIG_COUNT=%q is not a count; unset it or fix it", c)
		}
		for i := range int(n) {
			kn, vn := fmt.Sprintf("GIT_CONFIG_KEY_%d", i), fmt.Sprintf("GIT_CONFIG_VALUE_%d", i)
			k := env(kn)
			if k == "" {
				return nil, bad("%s is missing (GIT_CONFIG_COUNT=%s)", kn, c)
			}
			key, ok := canonicalKey(k)
			if !ok {
				return nil, bad("%s=%q is not a valid key", kn, k)
			}
			// An empty value is a value (git cannot tell it from a missing
			// one through getenv either way it is read here).
			out = append(out, configVar{key: key, value: env(vn), set: true, file: "$" + kn})
		}
	}
	if p := env("GIT_CONFIG_PARAMETERS"); p != "" {
		vars, err := parseConfigParameters(p)
		if err != nil {
			return nil, bad("GIT_CONFIG_PARAMETERS: %v", err)
		}
		out = append(out, vars...)
	}
	return out, nil
}

// parseConfigParameters reads GIT_CONFIG_PARAMETERS: shell-quoted
// 'key=value' (old style), 'key'='value' or 'key'= items separated by
// spaces, as git's parse_config_env_list does.
func parseConfigParameters(s string) ([]configVar, error) {
	var out []configVar
	const file = "$GIT_CONFIG_PARAMETERS"
	for {
		s = strings.TrimLeft(s, " \t\n")
		if s == "" {
			return out, nil
		}
		k, rest, err := sqDequote(s)
		if err != nil {
			return nil, err
		}
		v := configVar{file: file}
		switch {
		case rest == "" || isSpace(rest[0]):
			name, val, eq := strings.Cut(k, "=")
			k, v.value, v.set = name, val, eq
		case rest[0] == '=':
			rest = rest[1:]
			switch {
			case strings.HasPrefix(rest, "'"):
				v.value, rest, err = sqDequote(rest)
				if err != nil {
					return nil, err
				}
				if rest != "" && !isSpace(rest[0]) {
					return nil, fmt.Errorf("bogus format after %q", k)
				}
				v.set = true
			case rest == "" || isSpace(rest[0]):
			default:
				return nil, fmt.Errorf("bogus format after %q", k)
			}
		default:
			return nil, fmt.Errorf("bogus format after %q", k)
		}
		key, ok := canonicalKey(k)
		if !ok {
			return nil, fmt.Errorf("%q is not a valid key", k)
		}
		v.key = key
		out = append(out, v)
		s = rest
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' }

// sqDequote reads one single-quoted word, as git's sq_quote writes it (a
// quote inside is closed, escaped and reopened), and returns it and the
// rest of s.
func sqDequote(s string) (string, string, error) {
	if !strings.HasPrefix(s, "'") {
		return "", s, fmt.Errorf("expected a quote at %.20q", s)
	}
	var b strings.Builder
	i := 1
	for {
		j := strings.IndexByte(s[i:], '\'')
		if j < 0 {
			return "", s, fmt.Errorf("unterminated quote at %.20q", s)
		}
		b.WriteString(s[i : i+j])
		i += j + 1
		// '\'' and '\!' continue the word.
		if i+2 < len(s) && s[i] == '\\' && (s[i+1] == '\'' || s[i+1] == '!') && s[i+2] == '\'' {
			b.WriteByte(s[i+1])
			i += 3
			continue
		}
		return b.String(), s[i:], nil
	}
}

// canonicalKey is git's git_config_parse_key: section and name lower-cased,
// a subsection kept as written; false for a key git rejects.
func canonicalKey(k string) (string, bool) {
	first, last := strings.IndexByte(k, '.'), strings.LastIndexByte(k, '.')
	if first <= 0 || last == len(k)-1 {
		return "", false
	}
	section, name := k[:first], k[last+1:]
	for i := 0; i < len(section); i++ {
		if !isKeyChar(section[i]) {
			return "", false
		}
	}
	for i := 0; i < len(name); i++ {
		if !isKeyChar(name[i]) || i == 0 && !(name[i] >= 'a' && name[i] <= 'z' || name[i] >= 'A' && name[i] <= 'Z') {
			return "", false
		}
	}
	out := strings.ToLower(section)
	if last > first {
		out += k[first:last]
	}
	return out + "." + strings.ToLower(name), true
}

type configLoader struct {
	c      *Config
	env    ConfigEnv
	gitDir string
	head   string
	// hasconfig: an includeIf "hasconfig:remote.*.url:" was seen.
	hasconfig bool
	// urls are the remote URLs of the whole configuration, once known.
	urls      []string
	urlsKnown bool
	// underURLCond: the file being read is included through a
	// hasconfig:remote.*.url condition, so it may not set remote URLs.
	underURLCond bool
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
	return l.add(vars, depth)
}

// add takes the variables of one source and follows its includes.
func (l *configLoader) add(vars []configVar, depth int) error {
	for _, v := range vars {
		if l.underURLCond && isRemoteURL(v.key) {
			return refuse(ctoharness.BlockSourceUnreadable,
				"%s sets %s but is included through includeIf \"hasconfig:remote.*.url:\", which git refuses; move the remote out of it", v.file, v.key)
		}
		l.c.vars = append(l.c.vars, v)
		inc, urlCond, ok, err := l.includePath(v)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		prev := l.underURLCond
		l.underURLCond = prev || urlCond
		err = l.file(inc, depth+1, true)
		l.underURLCond = prev
		if err != nil {
			return err
		}
	}
	return nil
}

// includePath is the file an include.path or a matching includeIf.*.path
// names, resolved as git resolves it; urlCond tells that the condition was
// hasconfig:remote.*.url.
func (l *configLoader) includePath(v configVar) (path string, urlCond, ok bool, err error) {
	var cond string
	switch {
	case v.key == "include.path":
	case strings.HasPrefix(v.key, "includeif.") && strings.HasSuffix(v.key, ".path"):
		cond = v.key[len("includeif.") : len(v.key)-len(".path")]
		urlCond = strings.HasPrefix(cond, "hasconfig:remote.*.url:")
		match, known := l.condition(cond, filepath.Dir(v.file))
		if !known {
			return "", false, false, refuse(ctoharness.BlockSourceGitFeature,
				"%s sets includeIf %q, a condition the harness does not evaluate; git might read more configuration than the harness would", v.file, cond)
		}
		if urlCond && !l.urlsKnown {
			// First pass: collect the remote URLs without it. The file it
			// names is still read, to refuse remote URLs in it as git does.
			match = true
		}
		if !match {
			return "", false, false, nil
		}
	default:
		return "", false, false, nil
	}
	if !v.set || v.value == "" {
		return "", false, false, nil
	}
	p := l.expand(v.value)
	if !filepath.IsAbs(p) {
		if strings.HasPrefix(v.file, "$") {
			return "", false, false, refuse(ctoharness.BlockSourceUnreadable,
				"%s includes %q, a relative path, which git refuses outside a file; use an absolute path", v.file, v.value)
		}
		p = filepath.Join(filepath.Dir(v.file), p)
	}
	return p, urlCond, true, nil
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
	case strings.HasPrefix(cond, "hasconfig:remote.*.url:"):
		l.hasconfig = true
		pat := cond[len("hasconfig:remote.*.url:"):]
		return slices.ContainsFunc(l.urls, func(u string) bool { return wildmatch(pat, u, true) }), true
	case strings.HasPrefix(cond, "onbranch:"):
		pat := cond[len("onbranch:"):]
		if strings.HasSuffix(pat, "/") {
			pat += "**"
		}
		return l.head != "" && wildmatch(pat, l.head, true), true
	}
	return false, false
}

// parseConfig parses git's configuration syntax as git's
// git_parse_source does: sections with optional quoted subsections (and
// the legacy [section.sub] form), case-insensitive names starting with a
// letter, quoted values with \n \t \b \" \\ escapes, backslash line
// continuation and # or ; comments. What git calls a bad config line is
// refused, so that the harness never reads a repository git cannot.
func parseConfig(data []byte, file string) ([]configVar, error) {
	s := string(data)
	s = strings.TrimPrefix(s, "\xef\xbb\xbf")
	var out []configVar
	section := "" // with its trailing dot once a header was read
	line := 1
	i := 0
	bad := func(what string) error {
		return &UnsupportedError{Code: ctoharness.BlockSourceUnreadable, Reason: fmt.Sprintf("bad git config line %d in %s: %s; git refuses this file too, so fix that line", line, file, what)}
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
			name, next, err := parseSectionHeader(s, i+1)
			if err != nil {
				return nil, bad(err.Error())
			}
			i = next
			section = name + "."
		case isAlpha(c):
			// A key before any section header is read by git as it
			// stands, without a section.
			start := i
			for i < len(s) && isKeyChar(s[i]) {
				i++
			}
			v := configVar{key: section + strings.ToLower(s[start:i]), file: file}
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
			switch {
			case i < len(s) && s[i] == '=':
				i++
				v.set = true
				var val string
				var err error
				val, i, line, err = parseValue(s, i, line)
				if err != nil {
					return nil, bad(err.Error())
				}
				v.value = val
			case !atLineEnd(s, i):
				// git takes nothing but "=" or the end of the line after
				// a key: not even a comment.
				return nil, bad(fmt.Sprintf("expected '=' or the end of the line after key %q", s[start:i]))
			}
			out = append(out, v)
		default:
			return nil, bad(fmt.Sprintf("unexpected character %q", c))
		}
	}
	return out, nil
}

// parseSectionHeader reads a section header from just after its "[", as
// git's get_base_var and get_extended_base_var do, and returns the
// section (lower-cased, ".subsection" appended as written) and where the
// header ends. The name is key characters and dots; whitespace after it
// (git's isspace: space, tab or a carriage return, a line end refused)
// starts a quoted subsection, in which a backslash keeps the next
// character whatever it is and a line end is refused; "]" must follow.
func parseSectionHeader(s string, i int) (string, int, error) {
	start := i
	for i < len(s) && (isKeyChar(s[i]) || s[i] == '.') {
		i++
	}
	name := strings.ToLower(s[start:i])
	switch {
	case i < len(s) && s[i] == ']':
		if name == "" {
			return "", i, errors.New("empty section name")
		}
		// Legacy [section.subsection]: lower-cased as a whole.
		return name, i + 1, nil
	case atLineEnd(s, i):
		return "", i, errors.New("unterminated section header")
	case !isConfigSpace(s[i]):
		return "", i, fmt.Errorf("unexpected character %q in a section header", s[i])
	}
	for !atLineEnd(s, i) && isConfigSpace(s[i]) {
		i++
	}
	if atLineEnd(s, i) {
		return "", i, errors.New("line end before a subsection")
	}
	if s[i] != '"' {
		return "", i, errors.New("subsection must be quoted")
	}
	i++
	var sub strings.Builder
	for {
		if i >= len(s) {
			return "", i, errors.New("unterminated subsection")
		}
		c := s[i]
		if c == '"' {
			break
		}
		if c == '\\' {
			i++
			if atLineEnd(s, i) {
				return "", i, errors.New("line end in a subsection")
			}
			c = s[i]
		} else if c == '\n' {
			return "", i, errors.New("line end in a subsection")
		}
		sub.WriteByte(c)
		i++
	}
	i++
	if i >= len(s) || s[i] != ']' {
		return "", i, errors.New("a subsection must be followed by ']'")
	}
	return name + "." + sub.String(), i + 1, nil
}

// atLineEnd reports whether s ends a line at i as git's get_next_char
// reads it: "\n", "\r\n" or the end of the file.
func atLineEnd(s string, i int) bool {
	return i >= len(s) || s[i] == '\n' || s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n'
}

// isConfigSpace is git's isspace: space, tab, line feed and carriage
// return, not the C library's vertical tab or form feed.
func isConfigSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isKeyChar(c byte) bool {
	return isAlpha(c) || c >= '0' && c <= '9' || c == '-'
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
			// git keeps inner whitespace as one space per character.
			if started {
				pendingSpace++
				b.WriteByte(' ')
			}
			continue
		}
		pendingSpace = 0
		started = true
		switch c {
		case '\\':
			if i >= len(s) {
				continue // git reads the end of the file as a line end: a continuation
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
