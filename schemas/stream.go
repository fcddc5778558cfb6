package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"
)

// streamAbove is the size over which a document whose kind has item-wise
// arrays is validated item by item: a source proof of a million files
// decoded whole into generic JSON values takes gigabytes.
const streamAbove = 256 << 10

// itemwise lists, for a kind's schema src, the top-level properties that
// can be validated one item at a time, each with its compiled items
// schema: a property whose schema is only {"type": "array", "items": …}
// and that no top-level rule (if/then/else, allOf, …) names, so that its
// items checked alone and the document checked with an empty array there
// are exactly the checks of the whole document.
func itemwise(c *jsonschema.Compiler, k Kind, src []byte) (map[string]itemSchema, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(src, &top); err != nil {
		return nil, err
	}
	var props map[string]map[string]json.RawMessage
	if err := json.Unmarshal(top["properties"], &props); err != nil || props == nil {
		return nil, nil // no properties object: nothing is item-wise
	}
	var rules bytes.Buffer
	for key, v := range top {
		switch key {
		case "$schema", "$id", "title", "description", "type", "additionalProperties", "required", "properties", "$defs":
		default:
			rules.Write(v)
		}
	}
	out := map[string]itemSchema{}
	for name, p := range props {
		if string(p["type"]) != `"array"` || p["items"] == nil || bytes.Contains(rules.Bytes(), []byte(strconv.Quote(name))) {
			continue
		}
		only := true
		for key := range p {
			only = only && (key == "type" || key == "items" || key == "description")
		}
		if !only {
			continue
		}
		sch, err := c.Compile(k.ID() + "#/properties/" + pointerToken(name) + "/items")
		if err != nil {
			return nil, err
		}
		out[name] = itemSchema{full: sch, fast: fastItems(src, name)}
	}
	return out, nil
}

// itemSchema checks the items of one array: fast accepts the items it is
// sure of (nil: none), full decides the rest.
type itemSchema struct {
	full *jsonschema.Schema
	fast *fastNode
}

// problems are item i of the array key, encoded as data, checked:
// pointers into the whole document, keywords into the kind's schema.
func (it itemSchema) problems(key string, i int, data []byte) []Problem {
	if it.fast != nil && it.fast.accepts(data) {
		return nil // surely valid (see fastNode)
	}
	at := "/" + pointerToken(key) + "/" + strconv.Itoa(i)
	v, err := decode(data)
	if err != nil {
		return []Problem{{Pointer: at, Message: "malformed JSON: " + err.Error()}}
	}
	problems := problemsOf(it.full.Validate(v))
	keyword := "/properties/" + pointerToken(key) + "/items"
	for j := range problems {
		problems[j].Pointer = at + problems[j].Pointer
		problems[j].Keyword = keyword + strings.TrimPrefix(problems[j].Keyword, "#")
	}
	return problems
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// errNotStreamable sends a document back to whole validation: it is not
// an object, or not well-formed (the whole path names where).
var errNotStreamable = errors.New("not streamable")

// validateItemwise checks data as sch would, decoding the arrays of items
// one item at a time: each item against its items schema, the rest of
// the document (those arrays left empty) against sch. The problems are
// the whole validation's: pointers into the document, keywords into the
// kind's schema.
func validateItemwise(sch *jsonschema.Schema, items map[string]itemSchema, data []byte) ([]Problem, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errNotStreamable
	}
	doc := map[string]any{}
	var problems []Problem
	for dec.More() {
		t, err := dec.Token()
		key, ok := t.(string)
		if err != nil || !ok {
			return nil, errNotStreamable
		}
		itemSch, split := items[key]
		if !split {
			var v any
			if err := dec.Decode(&v); err != nil {
				return nil, errNotStreamable
			}
			doc[key] = v
			continue
		}
		if t, err := dec.Token(); err != nil || t != json.Delim('[') {
			return nil, errNotStreamable // not an array: the whole path says so
		}
		for i := 0; dec.More(); i++ {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return nil, errNotStreamable
			}
			problems = append(problems, itemSch.problems(key, i, raw)...)
		}
		if _, err := dec.Token(); err != nil {
			return nil, errNotStreamable
		}
		doc[key] = []any{}
	}
	if _, err := dec.Token(); err != nil {
		return nil, errNotStreamable
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errNotStreamable // trailing data
	}
	problems = append(problems, problemsOf(sch.Validate(doc))...)
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Pointer < problems[j].Pointer })
	return problems, nil
}

// problemsOf is a validation's error as problems (none when err is nil).
func problemsOf(err error) []Problem {
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return []Problem{{Message: err.Error()}}
	}
	return leaves(ve)
}

// ItemWise reports whether key is an array of kind's documents that is
// validated one item at a time (see itemwise): a writer may then validate
// the document with that array empty and each item with ValidateItem, and
// has checked exactly what Validate of the whole document checks.
func (s *Set) ItemWise(kind Kind, key string) bool {
	_, ok := s.items[kind][key]
	return ok
}

// ValidateItem validates data as item i of the item-wise array key of
// kind's documents; the problems point into the whole document.
func (s *Set) ValidateItem(kind Kind, key string, i int, data []byte) error {
	sch, ok := s.items[kind][key]
	if !ok {
		return fmt.Errorf("%s is not an item-wise array of %s documents", key, kind)
	}
	if problems := sch.problems(key, i, data); len(problems) > 0 {
		return &ValidationError{Kind: kind, Problems: problems}
	}
	return nil
}
