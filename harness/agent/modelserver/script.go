package modelserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
)

// Action is what one scripted turn makes the model do.
type Action string

// Actions a turn can take.
const (
	// ActionWrite writes Content to Path with the agent's file-writing tool.
	// A path outside the allowed roots is just a write with that path.
	ActionWrite Action = "write"
	// ActionShell runs Command with the agent's shell tool.
	ActionShell Action = "shell"
	// ActionLeakKey writes the API key the request carried to Path.
	ActionLeakKey Action = "leak_key"
	// ActionText answers with Text and no tool call: the agent's last turn.
	ActionText Action = "text"
	// ActionError answers with HTTP Status and Body (an API-shaped error
	// body when Body is empty).
	ActionError Action = "error"
	// ActionStall answers 200 with streaming headers and then nothing, until
	// the client gives up or the server closes: a stalled provider.
	ActionStall Action = "stall"
)

// Turn is one scripted model turn.
type Turn struct {
	Action  Action `json:"action"`
	Path    string `json:"path,omitempty"`    // write, leak_key
	Content string `json:"content,omitempty"` // write
	Command string `json:"command,omitempty"` // shell
	// Text is the answer of a text turn, and optional assistant text sent
	// before the tool call of a tool turn.
	Text   string `json:"text,omitempty"`
	Status int    `json:"status,omitempty"` // error
	Body   string `json:"body,omitempty"`   // error
	// FailFirst answers the first FailFirst requests for this turn with
	// FailStatus (an API-shaped error body) before playing it: a provider
	// that fails, then recovers (429 twice, then the answer).
	FailFirst  int `json:"fail_first,omitempty"`
	FailStatus int `json:"fail_status,omitempty"`
}

// Script is the ordered turns of one conversation. Turn i is played when the
// conversation already holds i tool results; past the last turn the model
// answers with DefaultFinalText.
type Script struct {
	Turns []Turn `json:"turns"`
}

// DefaultFinalText is the answer once the script has run out of turns, and
// the answer to side requests that offer no tools.
const DefaultFinalText = "Done."

// ErrBadScript reports a script that cannot be played.
var ErrBadScript = errors.New("modelserver: bad script")

// Validate checks that every turn has what its action needs.
func (s Script) Validate() error {
	for i, t := range s.Turns {
		var missing string
		switch t.Action {
		case ActionWrite:
			if t.Path == "" {
				missing = "path"
			}
		case ActionLeakKey:
			if t.Path == "" {
				missing = "path"
			}
		case ActionShell:
			if t.Command == "" {
				missing = "command"
			}
		case ActionText, ActionStall:
		case ActionError:
			if t.Status < 400 || t.Status > 599 {
				return fmt.Errorf("%w: turn %d: error status %d is not an HTTP error (400-599)", ErrBadScript, i+1, t.Status)
			}
		default:
			return fmt.Errorf("%w: turn %d: unknown action %q (want write, shell, leak_key, text, error or stall)", ErrBadScript, i+1, t.Action)
		}
		if t.FailFirst < 0 || t.FailFirst > 0 && (t.FailStatus < 400 || t.FailStatus > 599) {
			return fmt.Errorf("%w: turn %d: fail_first %d needs a fail_status that is an HTTP error (400-599), not %d", ErrBadScript, i+1, t.FailFirst, t.FailStatus)
		}
		if missing != "" {
			return fmt.Errorf("%w: turn %d: %s needs %s", ErrBadScript, i+1, t.Action, missing)
		}
	}
	return nil
}

// LoadScript reads a JSON script file ({"turns":[...]}).
func LoadScript(path string) (Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Script{}, fmt.Errorf("modelserver: read script: %w", err)
	}
	var s Script
	if err := json.Unmarshal(b, &s); err != nil {
		return Script{}, fmt.Errorf("%w: %s: %v", ErrBadScript, path, err)
	}
	if err := s.Validate(); err != nil {
		return Script{}, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// turn returns the turn to play after n tool results, or a final text turn
// past the end of the script.
func (s Script) turn(n int) Turn {
	if n < len(s.Turns) {
		return s.Turns[n]
	}
	return Turn{Action: ActionText, Text: DefaultFinalText}
}
