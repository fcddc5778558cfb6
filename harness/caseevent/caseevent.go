// Package caseevent reads the lines Case writes on stdout as the adapter
// contract defines them, strictly: Case is hostile, so a line is an event
// only if there is exactly one way to read it. The harness's ingest, the
// validator and the report page all read Case's events through here, so
// that what one of them accepts, the others read the same way.
package caseevent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"

	ctoharness "github.com/cto-harness/cto-harness"
)

// MaxDepth is the deepest nesting of objects and arrays an event may have
// (the event object itself is level 1). It is checked token by token before
// anything decodes the line, so a line nested thousands deep costs no more
// than its first MaxDepth+1 brackets.
const MaxDepth = 32

// MaxEnvelopedDepth is MaxDepth for a line of the normalized event log,
// whose envelope carries a Case event's fields one level down, in "data".
const MaxEnvelopedDepth = MaxDepth + 1

// MaxLine bounds one event line in bytes; a longer line is malformed.
const MaxLine = 64 * 1024

// Reasons a line is not an event; the errors Parse and Check return wrap
// one. No error quotes the line: what Case wrote stays in Case's own logs
// and never reaches a message the harness records.
var (
	ErrEmpty        = errors.New("empty line")
	ErrTooLarge     = errors.New("line too long")
	ErrSyntax       = errors.New("not one JSON value")
	ErrTooDeep      = errors.New("nested too deep")
	ErrDuplicateKey = errors.New("duplicate key")
	ErrNotObject    = errors.New("not a JSON object")
	ErrNoType       = errors.New("no \"type\" key with a string value")
	ErrUnknownType  = errors.New("unknown event type")
)

// Parse checks one line of Case's stdout and returns the event's type. The
// line (surrounding white space aside) must be one JSON object of at most
// MaxLine bytes and MaxDepth levels, with no duplicate key at any level, a
// top-level key spelled exactly "type" whose value is the name of one of
// the five Case events, and nothing after the object. Keys count as
// duplicates when encoding/json would decode them into the same field, that
// is when they are equal ignoring case: {"type":"case.log","TYPE":"..."} is
// refused rather than read one way here and another way elsewhere.
func Parse(line []byte) (ctoharness.EventType, error) {
	line = bytes.TrimSpace(line)
	if len(line) > MaxLine {
		return "", fmt.Errorf("%w: %d bytes, the limit is %d", ErrTooLarge, len(line), MaxLine)
	}
	return Type(line)
}

// Type checks one event as Parse does, except for its size, and returns its
// type. It reads the events the harness builds from a coding agent's own
// stream (their size is the agent's, as the lines of that stream are capped
// where they are read) and the raw copies in backend/case.events.jsonl, which
// hold both kinds.
func Type(event []byte) (ctoharness.EventType, error) {
	line := bytes.TrimSpace(event)
	if len(line) == 0 {
		return "", ErrEmpty
	}
	top, err := scan(line, MaxDepth, "type")
	if err != nil {
		return "", err
	}
	if !top.object {
		return "", ErrNotObject
	}
	s, ok := top.value.(string)
	if !top.found || !ok {
		return "", ErrNoType
	}
	t := ctoharness.EventType(s)
	if !known(t) {
		return "", ErrUnknownType
	}
	return t, nil
}

// known reports whether t is one of the event types the contract defines.
func known(t ctoharness.EventType) bool {
	switch t {
	case ctoharness.EvCaseStarted, ctoharness.EvCaseFileChanged, ctoharness.EvCaseCommand, ctoharness.EvCaseLog, ctoharness.EvCaseFinished:
		return true
	}
	return false
}

// Check checks that data is exactly one JSON value nested at most maxDepth
// levels, with no duplicate key (as Parse counts them) in any object. Use it
// before decoding JSON that carries Case's data, such as a line of the
// normalized event log, whose envelope adds one level to Case's event.
func Check(data []byte, maxDepth int) error {
	_, err := scan(data, maxDepth, "")
	return err
}

// topLevel is what scan saw of the outermost value.
type topLevel struct {
	object bool       // the value is an object
	found  bool       // it has the key scan was asked for
	value  json.Token // that key's value when it is a scalar, else a json.Delim
}

// frame is one open object or array.
type frame struct {
	object  bool
	wantKey bool            // in an object: the next token is a key or '}'
	keys    map[string]bool // the object's keys so far, folded
	last    string          // the object's latest key
}

// scan reads data token by token, without recursion, keeping only the stack
// of open objects and arrays; it stops at the first token past maxDepth. It
// reports the outermost object's key named key, when asked for one.
func scan(data []byte, maxDepth int, key string) (topLevel, error) {
	var top topLevel
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // a number is syntax here; its range is not
	var stack []frame
	done := false
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if !done {
				return top, fmt.Errorf("%w: it ends early, at byte %d", ErrSyntax, dec.InputOffset())
			}
			return top, nil
		}
		if err != nil {
			return top, fmt.Errorf("%w: invalid at byte %d", ErrSyntax, dec.InputOffset())
		}
		if done {
			return top, fmt.Errorf("%w: more data after the value, at byte %d", ErrSyntax, dec.InputOffset())
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			if k, ok := tok.(string); ok {
				f := &stack[n-1]
				folded := fold(k)
				if f.keys[folded] {
					return top, fmt.Errorf("%w at depth %d, byte %d", ErrDuplicateKey, n, dec.InputOffset())
				}
				if f.keys == nil {
					f.keys = map[string]bool{}
				}
				f.keys[folded] = true
				f.last, f.wantKey = k, false
				if n == 1 && key != "" && k == key {
					top.found = true
				}
				continue
			}
			// Not a key: the decoder allows only '}' here.
		}
		if len(stack) == 1 && stack[0].object && !stack[0].wantKey && top.found && top.value == nil && stack[0].last == key {
			top.value = tok
		}
		if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
			if len(stack) >= maxDepth {
				return top, fmt.Errorf("%w: more than %d levels at byte %d", ErrTooDeep, maxDepth, dec.InputOffset())
			}
			if len(stack) == 0 {
				top.object = d == '{'
			}
			stack = append(stack, frame{object: d == '{', wantKey: d == '{'})
			continue
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
		}
		// A value ended: the whole input's, or one inside an object or array.
		switch n := len(stack); {
		case n == 0:
			done = true
		case stack[n-1].object:
			stack[n-1].wantKey = true
		}
	}
}

// fold maps a key to the same string as every key encoding/json would match
// with it (bytes.EqualFold: Unicode simple case folding).
func fold(s string) string {
	var b []byte
	for _, r := range s {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b = utf8.AppendRune(b, r)
	}
	return string(b)
}
