package scan

import (
	"errors"
	"fmt"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// unknownVar stands in for run-time values when a resolved string is parsed
// again as shell source (bash -c, eval, here-documents).
const unknownVar = "__cto_unknown__"

// stmtRef points at the statement a finding is about.
type stmtRef struct{ from, to syntax.Pos }

func refOf(n syntax.Node) *stmtRef { return &stmtRef{n.Pos(), n.End()} }

// pos returns the finding line and the statement's first source line.
func (r *stmtRef) pos(u *unit) (int, string) {
	if r == nil {
		return u.lineBase, ""
	}
	line := u.lineBase + int(r.from.Line()) - 1
	a, b := int(r.from.Offset()), int(r.to.Offset())
	text := ""
	if a >= 0 && a <= b && b <= len(u.src) {
		text = u.src[a:b]
	}
	return line, cmdText(text)
}

func cmdText(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	s = strings.TrimSpace(strings.ReplaceAll(s, "${"+unknownVar+"}", unknownMark))
	if len(s) > maxCmdText {
		s = s[:maxCmdText] + "…"
	}
	return display(s)
}

// shellSource parses and analyzes one unit of shell source.
func (s *scanner) shellSource(u *unit, e *env) {
	if s.ctx.Err() != nil {
		return
	}
	if u.depth > MaxDepth {
		s.add(u, u.lineBase, PatUnscannable, cmdText(u.src), fmt.Sprintf("nested deeper than %d levels", MaxDepth))
		return
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(u.src), "")
	if err != nil {
		line := u.lineBase
		var pe syntax.ParseError
		if errors.As(err, &pe) {
			line = u.lineBase + int(pe.Pos.Line()) - 1
		}
		s.add(u, line, PatUnscannable, "", "cannot be parsed as shell: "+err.Error())
		return
	}
	markAssigned(f, e)
	s.stmts(u, f.Stmts, e)
}

// nested analyzes a resolved string as shell source (bash -c, eval, su -c,
// trap, here-strings) found at line of u.
func (s *scanner) nested(u *unit, at *stmtRef, src string, line int, e *env) {
	if len(src) > MaxFileBytes {
		l, cmd := at.pos(u)
		s.add(u, l, PatUnscannable, cmd, fmt.Sprintf("executes a string larger than %d bytes", MaxFileBytes))
		return
	}
	if strings.Trim(src, unknownMark+" \t\n") == "" {
		if strings.Contains(src, unknownMark) {
			l, cmd := at.pos(u)
			s.add(u, l, PatDynamicEval, cmd, "executes shell code that is only known at run time")
		}
		return
	}
	ne := e.clone()
	ne.vars[unknownVar] = unknownMark
	// A computed name (eval "${$1:+x}") stays a name: the placeholder variable.
	src = strings.ReplaceAll(src, "${"+unknownMark, "${"+unknownVar)
	src = strings.ReplaceAll(src, "$"+unknownMark, "$"+unknownVar)
	src = strings.ReplaceAll(src, unknownMark, "${"+unknownVar+"}")
	s.shellSource(u.child(src, line), ne)
}

func (s *scanner) stmts(u *unit, list []*syntax.Stmt, e *env) {
	for _, st := range list {
		if s.ctx.Err() != nil {
			return
		}
		s.stmt(u, st, e)
	}
}

func (s *scanner) stmt(u *unit, st *syntax.Stmt, e *env) {
	if s.steps++; s.steps > maxSteps {
		if s.steps == maxSteps+1 {
			line, cmd := refOf(st).pos(u)
			s.add(u, line, PatUnscannable, cmd, fmt.Sprintf("the scan stopped after %d statements", maxSteps))
		}
		return
	}
	switch c := st.Cmd.(type) {
	case *syntax.CallExpr:
		s.call(u, st, c, e)
	case *syntax.BinaryCmd:
		if c.Op == syntax.Pipe || c.Op == syntax.PipeAll {
			s.pipeline(u, flattenPipe(st), e)
		} else {
			s.stmt(u, c.X, e)
			s.stmt(u, c.Y, e)
		}
	case *syntax.Block:
		s.stmts(u, c.Stmts, e)
	case *syntax.Subshell:
		s.stmts(u, c.Stmts, e.clone())
	case *syntax.IfClause:
		for ic := c; ic != nil; ic = ic.Else {
			s.stmts(u, ic.Cond, e)
			s.stmts(u, ic.Then, e)
		}
	case *syntax.WhileClause:
		s.stmts(u, c.Cond, e)
		s.stmts(u, c.Do, e)
	case *syntax.ForClause:
		s.forClause(u, c, e)
	case *syntax.CaseClause:
		s.substs(u, c.Word, e)
		for _, it := range c.Items {
			for _, p := range it.Patterns {
				s.substs(u, p, e)
			}
			s.stmts(u, it.Stmts, e)
		}
	case *syntax.FuncDecl:
		s.stmt(u, c.Body, e.clone())
	case *syntax.DeclClause:
		s.decl(u, c, e)
	case *syntax.TimeClause:
		if c.Stmt != nil {
			s.stmt(u, c.Stmt, e)
		}
	case *syntax.CoprocClause:
		s.stmt(u, c.Stmt, e.clone())
	case *syntax.TestDecl:
		s.stmt(u, c.Body, e.clone())
	case nil:
	default: // [[ ]], (( )), let: only their substitutions run commands
		s.substs(u, c, e)
	}
	s.redirects(u, st, e)
}

func flattenPipe(st *syntax.Stmt) []*syntax.Stmt {
	if b, ok := st.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) && len(st.Redirs) == 0 {
		return append(flattenPipe(b.X), flattenPipe(b.Y)...)
	}
	return []*syntax.Stmt{st}
}

func (s *scanner) forClause(u *unit, c *syntax.ForClause, e *env) {
	wi, ok := c.Loop.(*syntax.WordIter)
	if !ok {
		s.substs(u, c.Loop, e)
		s.stmts(u, c.Do, e)
		return
	}
	r := resolver{e}
	var items []string
	known := true
	for _, w := range wi.Items {
		s.substs(u, w, e)
		items = append(items, r.fields(w)...)
	}
	for _, it := range items {
		if strings.Contains(it, unknownMark) {
			known = false
		}
	}
	if !wi.InPos.IsValid() || !known || len(items) > maxLoopItems || len(items) == 0 {
		e.vars[wi.Name.Value] = unknownMark
		s.stmts(u, c.Do, e)
		return
	}
	// Follow each literal item, so `for d in / /etc; do rm -rf "$d"; done` is seen.
	for _, it := range items {
		ie := e.clone()
		ie.vars[wi.Name.Value] = it
		s.stmts(u, c.Do, ie)
	}
	e.vars[wi.Name.Value] = items[len(items)-1]
}

func (s *scanner) decl(u *unit, d *syntax.DeclClause, e *env) {
	r := resolver{e}
	for _, a := range d.Args {
		s.substs(u, a.Value, e)
		if a.Array != nil {
			s.substs(u, a.Array, e)
		}
		if a.Name == nil {
			continue
		}
		switch {
		case a.Value != nil && !a.Append:
			e.vars[a.Name.Value] = r.word(a.Value)
		case a.Value != nil || a.Array != nil:
			e.vars[a.Name.Value] = unknownMark
		}
	}
}

// substs analyzes the command and process substitutions inside n (they run
// before, or alongside, the command they are part of).
func (s *scanner) substs(u *unit, n syntax.Node, e *env) {
	if n == nil {
		return
	}
	if w, ok := n.(*syntax.Word); ok && w == nil {
		return
	}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst:
			s.stmts(u, n.Stmts, e.clone())
			return false
		case *syntax.ProcSubst:
			s.stmts(u, n.Stmts, e.clone())
			return false
		}
		return true
	})
}

func (s *scanner) call(u *unit, st *syntax.Stmt, c *syntax.CallExpr, e *env) {
	for _, a := range c.Assigns {
		s.substs(u, a.Value, e)
		if a.Array != nil {
			s.substs(u, a.Array, e)
		}
	}
	for _, w := range c.Args {
		s.substs(u, w, e)
	}
	r := resolver{e}
	if len(c.Args) == 0 {
		for _, a := range c.Assigns {
			if a.Name == nil {
				continue
			}
			if a.Value != nil && !a.Append && a.Index == nil {
				e.vars[a.Name.Value] = r.word(a.Value)
			} else {
				e.vars[a.Name.Value] = unknownMark
			}
		}
		return
	}
	args := resolveArgs(r, c.Args)
	if len(args) == 0 {
		return
	}
	s.command(u, refOf(st), args, e, 0)
}

// arg is one resolved argument and the word it came from.
type arg struct {
	s string
	w *syntax.Word
}

func resolveArgs(r resolver, words []*syntax.Word) []arg {
	var args []arg
	for _, w := range words {
		for _, f := range r.fields(w) {
			args = append(args, arg{s: f, w: w})
		}
	}
	return args
}

// pipeline checks what flows between the parts of a pipeline, then each part.
func (s *scanner) pipeline(u *unit, parts []*syntax.Stmt, e *env) {
	infos := make([]info, len(parts))
	for i, p := range parts {
		infos[i] = s.infoOf(p, e)
	}
	for j := range parts {
		at := refOf(parts[j])
		line, cmd := at.pos(u)
		for i := 0; i < j; i++ {
			if infos[i].downloads && infos[j].interp != "" {
				s.add(u, line, PatRemoteExec, cmd, "content fetched over the network is piped into an interpreter")
			}
			if infos[i].envDump && infos[j].netSink {
				s.add(u, line, PatEnvExfiltration, cmd, "the environment is piped into a network tool")
			}
		}
		// `cat <<EOF | sh`: the here-document is the script.
		if j > 0 && infos[j].interp != "" {
			for _, r := range parts[j-1].Redirs {
				if (r.Op == syntax.Hdoc || r.Op == syntax.DashHdoc) && r.Hdoc != nil {
					s.hdocScript(u, r, infos[j].interp, e)
				}
			}
		}
	}
	for _, p := range parts {
		s.stmt(u, p, e.clone())
	}
}

func isOutput(op syntax.RedirOperator) bool {
	switch op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob, syntax.RdrAll,
		syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		return true
	}
	return false
}

func (s *scanner) redirects(u *unit, st *syntax.Stmt, e *env) {
	if len(st.Redirs) == 0 {
		return
	}
	var in info
	if st.Cmd != nil {
		in = s.infoOf(st.Cmd, e)
	}
	r := resolver{e}
	at := refOf(st)
	line, cmd := at.pos(u)
	for _, rd := range st.Redirs {
		s.substs(u, rd.Word, e)
		if rd.Hdoc != nil && !quotedDelim(rd.Word) {
			s.substs(u, rd.Hdoc, e)
		}
		switch {
		case rd.Op == syntax.Hdoc || rd.Op == syntax.DashHdoc:
			if in.interp != "" && rd.Hdoc != nil {
				s.hdocScript(u, rd, in.interp, e)
			}
			continue
		case rd.Op == syntax.WordHdoc:
			if in.interp == "sh" {
				s.nested(u, at, r.word(rd.Word), u.lineBase+int(rd.Word.Pos().Line())-1, e)
			} else if in.interp == "py" {
				s.python(u.child(r.word(rd.Word), u.lineBase+int(rd.Word.Pos().Line())-1))
			}
			continue
		}
		target := r.word(rd.Word)
		if h, ok := devNetHost(target); ok {
			s.checkHost(u, line, cmd, "a /dev/tcp redirection", h)
			if isOutput(rd.Op) && in.envDump {
				s.add(u, line, PatEnvExfiltration, cmd, "the environment is written to a network socket")
			}
			continue
		}
		switch {
		case rd.Op == syntax.RdrIn:
			if in.interp != "" && !strings.HasPrefix(target, devFdSentinel) {
				s.scriptArg(u, at, arg{s: target, w: rd.Word}, in.interp, e.clone())
			}
		case isOutput(rd.Op), (rd.Op == syntax.DplOut && !isFdWord(target)):
			s.checkWrite(u, line, cmd, target, e)
		}
	}
}

func isFdWord(s string) bool {
	if s == "-" || s == "" {
		return true
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func quotedDelim(w *syntax.Word) bool {
	if w == nil {
		return false
	}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.SglQuoted, *syntax.DblQuoted:
			return true
		case *syntax.Lit:
			if strings.Contains(p.Value, `\`) {
				return true
			}
		}
	}
	return false
}

// hdocScript analyzes a here-document that an interpreter reads as its program.
func (s *scanner) hdocScript(u *unit, rd *syntax.Redirect, interp string, e *env) {
	var b strings.Builder
	quoted := quotedDelim(rd.Word)
	r := resolver{e}
	for _, p := range rd.Hdoc.Parts {
		if lit, ok := p.(*syntax.Lit); ok {
			if quoted {
				b.WriteString(lit.Value)
			} else {
				b.WriteString(unescapeDouble(lit.Value))
			}
			continue
		}
		b.WriteString(r.part(p, false, true))
		if b.Len() > MaxFileBytes {
			break // nested reports it as unscannable
		}
	}
	line := u.lineBase + int(rd.Hdoc.Pos().Line()) - 1
	switch interp {
	case "sh":
		s.nested(u, refOf(rd), b.String(), line, e)
	case "py":
		if b.Len() > MaxFileBytes {
			s.add(u, line, PatUnscannable, "", fmt.Sprintf("a here-document larger than %d bytes", MaxFileBytes))
			return
		}
		s.python(u.child(b.String(), line))
	}
}

// info is what a statement does, as far as pipelines care.
type info struct {
	downloads bool   // writes content fetched over the network to stdout
	envDump   bool   // writes the environment to stdout
	netSink   bool   // sends its input over the network
	interp    string // "sh", "py" or "other" when it executes its stdin as a program
}

// infoOf inspects n without reporting anything.
func (s *scanner) infoOf(n syntax.Node, e *env) info {
	var in info
	r := resolver{e}
	syntax.Walk(n, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Stmt:
			for _, rd := range n.Redirs {
				if rd.Word != nil {
					if _, ok := devNetHost(r.word(rd.Word)); ok {
						in.downloads, in.netSink = true, true
					}
				}
			}
		case *syntax.DeclClause:
			if dumpDecl(n, r) {
				in.envDump = true
			}
		case *syntax.CallExpr:
			ci := callInfo(resolveArgs(r, n.Args))
			in.downloads = in.downloads || ci.downloads
			in.envDump = in.envDump || ci.envDump
			in.netSink = in.netSink || ci.netSink
			if in.interp == "" {
				in.interp = ci.interp
			}
		}
		return true
	})
	return in
}

// dumpDecl: export / declare -p / typeset -x with nothing to assign print variables.
func dumpDecl(d *syntax.DeclClause, r resolver) bool {
	switch d.Variant.Value {
	case "export", "declare", "typeset", "readonly":
	default:
		return false
	}
	for _, a := range d.Args {
		if a.Name != nil || a.Value == nil {
			return false
		}
		if v := r.word(a.Value); !strings.HasPrefix(v, "-") {
			return false
		}
	}
	return true
}

// wordDownloads reports whether a substitution inside w fetches from the network.
func (s *scanner) wordDownloads(w *syntax.Word, e *env) bool {
	return s.wordSubstInfo(w, e).downloads
}

func (s *scanner) wordSubstInfo(w *syntax.Word, e *env) info {
	var in info
	if w == nil {
		return in
	}
	syntax.Walk(w, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CmdSubst, *syntax.ProcSubst:
			i := s.infoOf(n, e)
			in.downloads = in.downloads || i.downloads
			in.envDump = in.envDump || i.envDump
			return false
		}
		return true
	})
	return in
}
