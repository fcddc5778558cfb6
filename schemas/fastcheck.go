package schemas

import (
	"encoding/json"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A fastCheck accepts a decoded JSON value (UseNumber) that its schema
// accepts, for the few keywords the evidence's item schemas use (types,
// required and additional properties, enums, string lengths and
// patterns, integer bounds, $refs into the same document). It only ever
// accepts: a value it is unsure of, or that looks wrong, goes to the full
// validator, which decides and names the problem. A source proof of 12k
// files holds 12k manifest items; checking each through the general
// validator was most of the cost of writing the proof.
type fastCheck func(v any) bool

// compileFast is a fastCheck for the schema node, with defs the
// document's $defs; ok is false when the node uses a keyword this does not
// know (the full validator then checks every item).
func compileFast(node json.RawMessage, defs map[string]json.RawMessage, depth int) (fastCheck, bool) {
	if depth > 16 {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(node, &m) != nil {
		return nil, false
	}
	if ref, ok := m["$ref"]; ok {
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
	var typ string
	if json.Unmarshal(m["type"], &typ) != nil {
		return nil, false
	}
	var checks []fastCheck
	for k, raw := range m {
		var c fastCheck
		ok := true
		switch k {
		case "type", "description", "title", "$comment":
			continue
		case "enum":
			c, ok = fastEnum(raw)
		case "minLength", "maxLength":
			c, ok = fastLength(k, raw, typ)
		case "pattern":
			c, ok = fastPattern(raw, typ)
		case "minimum", "maximum":
			c, ok = fastBound(k, raw, typ)
		case "required", "properties", "additionalProperties":
			if k == "properties" {
				c, ok = fastObject(m, defs, depth, typ)
			} else {
				continue // fastObject reads them with properties
			}
		default:
			return nil, false
		}
		if !ok {
			return nil, false
		}
		checks = append(checks, c)
	}
	if _, props := m["properties"]; !props && (m["required"] != nil || m["additionalProperties"] != nil) {
		return nil, false
	}
	is, ok := fastType(typ)
	if !ok {
		return nil, false
	}
	return func(v any) bool {
		if !is(v) {
			return false
		}
		for _, c := range checks {
			if !c(v) {
				return false
			}
		}
		return true
	}, true
}

func fastType(typ string) (fastCheck, bool) {
	switch typ {
	case "object":
		return func(v any) bool { _, ok := v.(map[string]any); return ok }, true
	case "string":
		return func(v any) bool { _, ok := v.(string); return ok }, true
	case "boolean":
		return func(v any) bool { _, ok := v.(bool); return ok }, true
	case "integer":
		return func(v any) bool { _, ok := integer(v); return ok }, true
	}
	return nil, false
}

// integer is v's digits when it is written as an integer (digits, an
// optional minus): 1.0 or 1e3 are left to the full validator.
func integer(v any) (string, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return "", false
	}
	s := string(n)
	if s == "" || strings.ContainsAny(s, ".eE+") {
		return "", false
	}
	return s, true
}

// cmpInt compares the integer written s with b.
func cmpInt(s string, b *big.Int) int {
	if b.IsInt64() {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			switch bi := b.Int64(); {
			case i < bi:
				return -1
			case i > bi:
				return 1
			}
			return 0
		}
	}
	z, ok := new(big.Int).SetString(s, 10)
	if !ok {
		return -2 // not an integer after all: never accepted
	}
	return z.Cmp(b)
}

func fastEnum(raw json.RawMessage) (fastCheck, bool) {
	var vals []string
	if json.Unmarshal(raw, &vals) != nil {
		return nil, false
	}
	return func(v any) bool {
		s, ok := v.(string)
		for _, e := range vals {
			if ok && s == e {
				return true
			}
		}
		return false
	}, true
}

func fastLength(k string, raw json.RawMessage, typ string) (fastCheck, bool) {
	var n int
	if typ != "string" || json.Unmarshal(raw, &n) != nil {
		return nil, false
	}
	return func(v any) bool {
		l := utf8.RuneCountInString(v.(string))
		if k == "minLength" {
			return l >= n
		}
		return l <= n
	}, true
}

func fastPattern(raw json.RawMessage, typ string) (fastCheck, bool) {
	var p string
	if typ != "string" || json.Unmarshal(raw, &p) != nil {
		return nil, false
	}
	re, err := regexp.Compile(p) // the full validator's own regexp engine
	if err != nil {
		return nil, false
	}
	return func(v any) bool { return re.MatchString(v.(string)) }, true
}

func fastBound(k string, raw json.RawMessage, typ string) (fastCheck, bool) {
	b, ok := new(big.Int).SetString(string(raw), 10)
	if typ != "integer" || !ok {
		return nil, false
	}
	return func(v any) bool {
		z, _ := integer(v)
		c := cmpInt(z, b)
		if k == "minimum" {
			return c >= 0
		}
		return c <= 0 && c != -2
	}, true
}

// fastObject checks an object's required and known properties, and, with
// additionalProperties false, that it has no other.
func fastObject(m map[string]json.RawMessage, defs map[string]json.RawMessage, depth int, typ string) (fastCheck, bool) {
	var props map[string]json.RawMessage
	var required []string
	closed := false
	if typ != "object" || json.Unmarshal(m["properties"], &props) != nil {
		return nil, false
	}
	if r, ok := m["required"]; ok && json.Unmarshal(r, &required) != nil {
		return nil, false
	}
	if a, ok := m["additionalProperties"]; ok {
		var allow bool
		if json.Unmarshal(a, &allow) != nil {
			return nil, false // a schema for the others: not known here
		}
		closed = !allow
	}
	sub := make(map[string]fastCheck, len(props))
	for name, p := range props {
		c, ok := compileFast(p, defs, depth+1)
		if !ok {
			return nil, false
		}
		sub[name] = c
	}
	return func(v any) bool {
		o := v.(map[string]any)
		for _, r := range required {
			if _, ok := o[r]; !ok {
				return false
			}
		}
		for k, x := range o {
			c, known := sub[k]
			if !known {
				if closed {
					return false
				}
				continue
			}
			if !c(x) {
				return false
			}
		}
		return true
	}, true
}

// fastItems compiles the items schema of the top-level property name of a
// kind's schema src; nil when it cannot.
func fastItems(src []byte, name string) fastCheck {
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
