package attest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// envelopeKeys are the only object keys a DSSE envelope may hold, spelled
// exactly: Go's encoding/json matches keys case-insensitively and keeps the
// last of two duplicates, while jq (the documented recipe) is
// case-sensitive, so a lenient decoder and the recipe could read two
// different payloads from one file.
var envelopeKeys = map[string]bool{"payloadType": true, "payload": true, "signatures": true, "keyid": true, "sig": true}

// checkKeys walks data token by token. Within every object the keys must be
// distinct even with case folded; when names is non-nil every key must also
// be one of names, exactly.
func checkKeys(data []byte, names map[string]bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	// One frame per open object or array: the folded keys seen (nil for an
	// array), and whether the next token of an object is a key.
	type frame struct {
		seen  map[string]string
		isKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) && len(stack) == 0 {
				return nil
			}
			return fmt.Errorf("%w: %v", ErrMalformed, err)
		}
		top := (*frame)(nil)
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].seen != nil {
				stack[len(stack)-1].isKey = true
			}
			if len(stack) == 0 && dec.More() {
				return fmt.Errorf("%w: data after the top-level value", ErrMalformed)
			}
			continue
		}
		if top != nil && top.seen != nil && top.isKey {
			k, _ := tok.(string)
			folded := strings.ToLower(strings.ToUpper(k))
			if prev, dup := top.seen[folded]; dup {
				if prev == k {
					return fmt.Errorf("%w: key %q appears twice in one object", ErrMalformed, k)
				}
				return fmt.Errorf("%w: keys %q and %q differ only in case", ErrMalformed, prev, k)
			}
			if names != nil && !names[k] {
				return fmt.Errorf("%w: unexpected key %q (keys are case-sensitive)", ErrMalformed, k)
			}
			top.seen[folded] = k
			top.isKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{seen: map[string]string{}, isKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		default:
			if top != nil && top.seen != nil {
				top.isKey = true // a scalar value ends the member
			}
		}
	}
}
