package gitstatus

import (
	"bytes"
	"path/filepath"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
)

// Conversions decides, path by path, how git converts content between a
// tree and a worktree: the text/eol/crlf and ident attributes of the
// tree's .gitattributes files (and .git/info/attributes), then
// core.autocrlf and core.eol. It is what a copy of a checkout must apply
// to be the checkout git would have written, and what hashing a worktree
// file must undo to compare it with the tree, without running anything the
// repository configures.
type Conversions struct {
	dirs     map[string]*attrFile // by directory: "" or "dir/"
	info     *attrFile
	global   []*attrFile
	macros   map[string][]attrAssign
	autocrlf string // "true", "input" or "false"
	crlfEOL  bool   // core.eol=crlf
	lfs      bool   // filter=lfs runs git-lfs (done natively)
}

// CheckoutSettings are the configuration values the conversions depend on.
type CheckoutSettings struct {
	AutoCRLF string // core.autocrlf as configured ("" when unset)
	EOL      string // core.eol as configured ("" when unset)
	LFS      bool   // the standard git-lfs filter driver is configured
	// Global are the attribute files outside the repository, in git's
	// order of precedence (core.attributesFile or its XDG default, then
	// /etc/gitattributes); see GlobalAttributeFiles.
	Global [][]byte
}

// GlobalAttributeFiles names the attribute files outside the repository
// git reads for the worktree root, highest precedence first.
func GlobalAttributeFiles(cfg *Config, env ConfigEnv, root string) []string {
	var out []string
	af, ok := cfg.Get("core.attributesfile")
	if ok {
		af = expandHome(af, env)
		if af != "" && !filepath.IsAbs(af) {
			af = filepath.Join(root, af)
		}
	} else if x := env.xdgDir(); x != "" {
		af = filepath.Join(x, "attributes")
	}
	if af != "" {
		out = append(out, af)
	}
	if on, err := systemAttributes(env); on || err != nil {
		out = append(out, "/etc/gitattributes")
	}
	return out
}

// systemAttributes reports whether git reads /etc/gitattributes: unless
// GIT_ATTR_NOSYSTEM is true (GIT_CONFIG_NOSYSTEM does not apply to
// attributes).
func systemAttributes(env ConfigEnv) (bool, error) {
	off, err := envBool(env, "GIT_ATTR_NOSYSTEM", false)
	return !off, err
}

// CheckoutSettingsOf reads core.autocrlf and core.eol from cfg.
func CheckoutSettingsOf(cfg *Config) CheckoutSettings {
	var s CheckoutSettings
	if cfg == nil {
		return s
	}
	s.AutoCRLF, _ = cfg.Get("core.autocrlf")
	s.EOL, _ = cfg.Get("core.eol")
	s.LFS = LFSEnabled(cfg)
	return s
}

// NewConversions builds the conversions of one tree. attrFiles maps the
// directory of each .gitattributes file ("" for the root, else "dir/") to
// its content; info is .git/info/attributes (nil when absent).
func NewConversions(attrFiles map[string][]byte, info []byte, s CheckoutSettings) *Conversions {
	c := &Conversions{dirs: make(map[string]*attrFile, len(attrFiles)), macros: cloneMacros(builtinMacros), autocrlf: "false"}
	switch v := strings.ToLower(strings.TrimSpace(s.AutoCRLF)); v {
	case "input":
		c.autocrlf = "input"
	case "true", "yes", "on", "1":
		c.autocrlf = "true"
	}
	c.crlfEOL = strings.EqualFold(strings.TrimSpace(s.EOL), "crlf")
	c.lfs = s.LFS
	if info != nil {
		c.info = parseAttrFile(info, "", true)
		for k, m := range c.info.macros {
			c.macros[k] = m
		}
	}
	for _, data := range s.Global {
		f := parseAttrFile(data, "", true)
		c.global = append(c.global, f)
		for k, m := range f.macros {
			c.macros[k] = m
		}
	}
	for dir, data := range attrFiles {
		f := parseAttrFile(data, dir, dir == "")
		c.dirs[dir] = f
		for k, m := range f.macros {
			c.macros[k] = m
		}
	}
	return c
}

// Conversion is what git does to one path's content on its way between
// the tree and the worktree.
type Conversion struct {
	in      conversion
	outCRLF bool   // LF -> CRLF on checkout
	Filter  string // the filter attribute's driver name, "" when none
	// LFS: the path's filter is git-lfs and git would run it; the
	// pointer <-> content step is the caller's on checkout (it needs the
	// LFS object store) and ToGit's on the way in.
	LFS bool
}

// For is the conversion of path.
func (c *Conversions) For(path string) Conversion {
	s := stackFor(path, c.macros, c.info, c.dirs, c.global)
	attrs := s.lookup(path, "text", "crlf", "eol", "ident", "filter")
	out := Conversion{in: conversionFor(attrs, c.autocrlf), outCRLF: c.outputCRLF(attrs)}
	if f := attrs["filter"]; f != attrTrue && f != attrFalse {
		out.Filter = f
	}
	out.LFS = c.lfs && out.Filter == "lfs"
	return out
}

// outputCRLF is git's output_eol(crlf_action) == EOL_CRLF, with the
// action as convert_attrs computes it.
func (c *Conversions) outputCRLF(attrs map[string]string) bool {
	action := func(v string, ok bool) string {
		switch {
		case !ok:
			return ""
		case v == attrTrue:
			return "text"
		case v == attrFalse:
			return "binary"
		case v == "input":
			return "text-input"
		case v == "auto":
			return "auto"
		}
		return ""
	}
	tv, tok := attrs["text"]
	a := action(tv, tok)
	if a == "" {
		cv, cok := attrs["crlf"]
		a = action(cv, cok)
	}
	if a == "binary" {
		return false
	}
	switch attrs["eol"] {
	case "lf":
		return false
	case "crlf":
		return true
	}
	switch a {
	case "text-input":
		return false
	case "text", "auto":
		// text_eol_is_crlf: autocrlf first, then core.eol (native is LF here).
		switch c.autocrlf {
		case "true":
			return true
		case "input":
			return false
		}
		return c.crlfEOL
	}
	return c.autocrlf == "true" // undecided: core.autocrlf (true is AUTO_CRLF)
}

// None reports whether content passes unchanged in both directions.
func (c Conversion) None() bool { return c.in.none() && !c.outCRLF && !c.LFS }

// ToGit converts worktree content as git does before hashing it (the
// filter attribute aside). indexHasCRLF is asked, at most once, whether the
// blob in the tree already has CRLF line endings (then "auto" keeps them).
func (c Conversion) ToGit(b []byte, indexHasCRLF func() (bool, error)) ([]byte, error) {
	if c.LFS {
		b = lfsClean(b) // git runs the filter first
	}
	if c.in.none() {
		return b, nil
	}
	return c.in.toGit(b, indexHasCRLF)
}

// ToWorktree converts blob content as git's checkout writes it: ident
// expansion with the blob's id, then LF -> CRLF where the attributes and
// configuration ask for it (convert_to_working_tree).
func (c Conversion) ToWorktree(b []byte, blob plumbing.Hash) []byte {
	if c.in.ident {
		b = identToWorktree(b, blob)
	}
	if !c.outCRLF || len(b) == 0 || c.in.crlf == crlfBinary {
		return b
	}
	s := gatherStats(b)
	if s.loneLF == 0 {
		return b
	}
	if c.in.crlf == crlfAuto && (s.loneCR > 0 || s.crlf > 0 || s.isBinary()) {
		return b
	}
	out := make([]byte, 0, len(b)+s.loneLF)
	for i, ch := range b {
		if ch == '\n' && (i == 0 || b[i-1] != '\r') {
			out = append(out, '\r')
		}
		out = append(out, ch)
	}
	return out
}

// identToWorktree is git's ident_to_worktree: every "$Id$" or "$Id: ... $"
// on one line becomes "$Id: <blob id> $".
func identToWorktree(src []byte, blob plumbing.Hash) []byte {
	if !bytes.Contains(src, []byte("$Id")) {
		return src
	}
	id := []byte("$Id: " + blob.String() + " $")
	var out []byte
	for {
		d := bytes.Index(src, []byte("$Id"))
		if d < 0 {
			break
		}
		out = append(out, src[:d]...)
		rest := src[d+3:]
		switch {
		case len(rest) > 0 && rest[0] == '$':
			out = append(out, id...)
			src = rest[1:]
			continue
		case len(rest) > 0 && rest[0] == ':':
			end := bytes.IndexByte(rest[1:], '$')
			nl := bytes.IndexByte(rest[1:], '\n')
			if end >= 0 && (nl < 0 || nl > end) {
				out = append(out, id...)
				src = rest[1+end+1:]
				continue
			}
		}
		out = append(out, "$Id"...)
		src = rest
	}
	return append(out, src...)
}

// HasCRLFText reports whether b is text with at least one CRLF: a blob
// git's "auto" conversions leave alone.
func HasCRLFText(b []byte) bool { return hasCRLFText(b) }
