package schemas

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/cto-harness/cto-harness/jsonscan"
)

// A fastNode accepts the encoded bytes of a JSON value that its schema
// accepts, for the few keywords the evidence's item schemas use (types,
// required and additional properties, string enums, string lengths and
// patterns, integer bounds, $refs into the same document), reading the
// bytes once without decoding them into generic values. It only ever
// accepts: a value it is unsure of (an escaped key, a number written
// 1.0, a key twice), or that looks wrong, goes to the full validator,
// which decides and names the problem. A source proof of 12k files holds
// 12k manifest items; decoding each into maps for the general validator
// was most of the cost of writing the proof.
type fastNode struct {
	kind           byte // 'o' object, 's' string, 'b' boolean, 'i' integer
	enum           []string
	hasEnum        bool
	minLen, maxLen int // -1: no bound
	pattern        *regexp.Regexp
	min, max       *intBound
	props          []fastProp
	required       uint64 // a bit per props index
	closed         bool   // additionalProperties is false
}

// fastProp is a known property of an object; its node checks the value.
type fastProp struct {
	name string
	node *fastNode
}

// compileFast is the fastNode of the schema node, with defs the
// document's $defs; ok is false when the node uses a keyword this does not
// know (the full validator then checks every item).
func compileFast(node json.RawMessage, defs map[string]json.RawMessage, depth int) (*fastNode, bool) {
	var m map[string]json.RawMessage
	if depth > 16 || json.Unmarshal(node, &m) != nil {
		return nil, false
	}
	if ref, ok := m["$ref"]; ok {
		return compileRef(ref, m, defs, depth)
	}
	var typ string
	if json.Unmarshal(m["type"], &typ) != nil {
		return nil, false
	}
	n := &fastNode{kind: map[string]byte{"object": 'o', "string": 's', "boolean": 'b', "integer": 'i'}[typ], minLen: -1, maxLen: -1}
	if n.kind == 0 {
		return nil, false
	}
	for k, raw := range m {
		ok := true
		switch k {
		case "type", "description", "title", "$comment":
		case "enum":
			n.hasEnum = true
			ok = n.kind == 's' && json.Unmarshal(raw, &n.enum) == nil
		case "minLength":
			ok = n.kind == 's' && json.Unmarshal(raw, &n.minLen) == nil && n.minLen >= 0
		case "maxLength":
			ok = n.kind == 's' && json.Unmarshal(raw, &n.maxLen) == nil && n.maxLen >= 0
		case "pattern":
			n.pattern, ok = fastPattern(raw, n.kind)
		case "minimum":
			n.min, ok = fastBound(raw, n.kind)
		case "maximum":
			n.max, ok = fastBound(raw, n.kind)
		case "properties":
			ok = n.kind == 'o' && fastObject(n, m, defs, depth)
		case "required", "additionalProperties":
			_, ok = m["properties"] // read with properties
		default:
			return nil, false
		}
		if !ok {
			return nil, false
		}
	}
	return n, true
}

// compileRef follows a $ref into the document's $defs; beside it only a
// description is known.
func compileRef(ref json.RawMessage, m, defs map[string]json.RawMessage, depth int) (*fastNode, bool) {
	var s string
	if json.Unmarshal(ref, &s) != nil || !strings.HasPrefix(s, "#/$defs/") || len(m) > 2 {
		return nil, false
	}
	if _, desc := m["description"]; len(m) == 2 && !desc {
		return nil, false
	}
	d, ok := defs[strings.TrimPrefix(s, "#/$defs/")]
	if !ok {
		return nil, false
	}
	return compileFast(d, defs, depth+1)
}

func fastPattern(raw json.RawMessage, kind byte) (*regexp.Regexp, bool) {
	var p string
	if kind != 's' || json.Unmarshal(raw, &p) != nil {
		return nil, false
	}
	re, err := regexp.Compile(p) // the full validator's own regexp engine
	return re, err == nil
}

// intBound is an integer bound; mag and neg are its magnitude and sign
// when the magnitude fits 64 bits (fits), which spares a big.Int per
// value compared.
type intBound struct {
	b    *big.Int
	neg  bool
	mag  uint64
	fits bool
}

func fastBound(raw json.RawMessage, kind byte) (*intBound, bool) {
	b, ok := new(big.Int).SetString(string(raw), 10)
	if kind != 'i' || !ok {
		return nil, false
	}
	abs := new(big.Int).Abs(b)
	return &intBound{b: b, neg: b.Sign() < 0, mag: abs.Uint64(), fits: abs.IsUint64()}, true
}

// cmp compares the integer written with sign neg and digits (JSON's: no
// leading zero) with the bound.
func (bd *intBound) cmp(neg bool, digits []byte) int {
	if len(digits) > 19 || !bd.fits {
		z, _ := new(big.Int).SetString(string(digits), 10)
		if neg {
			z.Neg(z)
		}
		return z.Cmp(bd.b)
	}
	var mag uint64
	for _, c := range digits {
		mag = mag*10 + uint64(c-'0') // 19 digits fit
	}
	neg = neg && mag != 0 // -0 is 0
	switch {
	case neg != bd.neg:
		if neg {
			return -1
		}
		return 1
	case mag == bd.mag:
		return 0
	case (mag < bd.mag) != neg:
		return -1
	}
	return 1
}

// fastObject reads an object's known properties, its required ones and,
// with additionalProperties false, that it has no other, into n.
func fastObject(n *fastNode, m map[string]json.RawMessage, defs map[string]json.RawMessage, depth int) bool {
	var props map[string]json.RawMessage
	var required []string
	if json.Unmarshal(m["properties"], &props) != nil || len(props) > 64 {
		return false
	}
	if r, ok := m["required"]; ok && json.Unmarshal(r, &required) != nil {
		return false
	}
	if a, ok := m["additionalProperties"]; ok {
		var allow bool
		if json.Unmarshal(a, &allow) != nil {
			return false // a schema for the others: not known here
		}
		n.closed = !allow
	}
	for name, p := range props {
		c, ok := compileFast(p, defs, depth+1)
		if !ok {
			return false
		}
		n.props = append(n.props, fastProp{name: name, node: c})
	}
	for _, r := range required {
		j := n.prop([]byte(r))
		if j < 0 {
			return false // required but not described: left to the full validator
		}
		n.required |= 1 << j
	}
	return true
}

// prop is the index of the property named key, or -1.
func (n *fastNode) prop(key []byte) int {
	for j := range n.props {
		if string(key) == n.props[j].name {
			return j
		}
	}
	return -1
}

// accepts reports whether data is one JSON value, alone but for white
// space, that the node surely accepts.
func (n *fastNode) accepts(data []byte) bool {
	s := jsonscan.New(data)
	return n.check(&s) && s.End()
}

// check reads one value from s and reports whether the node surely
// accepts it.
func (n *fastNode) check(s *jsonscan.Scanner) bool {
	switch n.kind {
	case 'o':
		return n.object(s)
	case 's':
		t, ok := s.Text()
		return ok && n.text(t)
	case 'b':
		return s.Literal("true") || s.Literal("false")
	case 'i':
		neg, digits, ok := s.Integer()
		return ok && (n.min == nil || n.min.cmp(neg, digits) >= 0) && (n.max == nil || n.max.cmp(neg, digits) <= 0)
	}
	return false
}

func (n *fastNode) text(t []byte) bool {
	if n.hasEnum {
		in := false
		for _, e := range n.enum {
			in = in || string(t) == e
		}
		if !in {
			return false
		}
	}
	if n.minLen >= 0 || n.maxLen >= 0 {
		l := utf8.RuneCount(t)
		if (n.minLen >= 0 && l < n.minLen) || (n.maxLen >= 0 && l > n.maxLen) {
			return false
		}
	}
	return n.pattern == nil || n.pattern.Match(t)
}

func (n *fastNode) object(s *jsonscan.Scanner) bool {
	var seen uint64
	return s.Members('}', func() bool {
		key, esc, ok := s.Str()
		if !ok || esc || s.Peek() != ':' {
			return false // an escaped key is left to the full validator
		}
		s.Next()
		switch j := n.prop(key); {
		case j < 0:
			return !n.closed && s.Skip()
		case seen&(1<<j) != 0:
			return false // a key twice: the decoder keeps the last, the full validator decides
		default:
			seen |= 1 << j
			return n.props[j].node.check(s)
		}
	}) && seen&n.required == n.required
}

// fastItems compiles the items schema of the top-level property name of a
// kind's schema src; nil when it cannot.
func fastItems(src []byte, name string) *fastNode {
	var top struct {
		Defs       map[string]json.RawMessage            `json:"$defs"`
		Properties map[string]map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(src, &top) != nil {
		return nil
	}
	c, ok := compileFast(top.Properties[name]["items"], top.Defs, 0)
	if !ok {
		return nil
	}
	return c
}
