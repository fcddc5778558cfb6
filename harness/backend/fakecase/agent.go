package fakecase

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/cto-harness/cto-harness/harness/task"
)

// AgentScenario makes the fake Case a stand-in coding agent, for the rows
// of the failure matrix that are about the model provider: it is started
// as qwen-code would be (the harness's qwen adapter builds its command line
// and environment), asks its model for an answer through OPENAI_BASE_URL
// (the harness's model meter) and retries a failed request the way real
// agents do, and writes qwen-code's stream-json. When an answer comes it
// makes the canned change and finishes; when none comes it gives up after
// agentAttempts and reports an error result. The harness is expected to
// stop it long before that.
const AgentScenario = "model-agent"

// agentAttempts bounds the stand-in's retries; each waits agentBackoff
// more than the one before, up to a second.
const (
	agentAttempts = 40
	agentBackoff  = 200 * time.Millisecond
)

// agentMain runs the stand-in agent. Its arguments (the prompt and
// qwen-code's flags) are ignored.
func agentMain(stdout, stderr io.Writer, getenv func(string) string) int {
	out := json.NewEncoder(stdout)
	model := getenv("OPENAI_MODEL")
	_ = out.Encode(map[string]any{"type": "system", "subtype": "init", "model": model, "qwen_code_version": "fake-agent"})
	base := strings.TrimSuffix(getenv("OPENAI_BASE_URL"), "/")
	if base == "" {
		return agentFailed(out, stderr, 0, "OPENAI_BASE_URL is not set")
	}
	var last string
	for attempt := 1; attempt <= agentAttempts; attempt++ {
		text, err := askModel(base, getenv("OPENAI_API_KEY"), model)
		if err == nil {
			return agentAnswered(out, stderr, getenv, attempt, text)
		}
		last = err.Error()
		fmt.Fprintf(stderr, "fake agent: model request %d failed: %s; retrying\n", attempt, last)
		time.Sleep(min(time.Duration(attempt)*agentBackoff, time.Second))
	}
	return agentFailed(out, stderr, agentAttempts, "the model never answered: "+last)
}

// askModel makes one streamed Chat Completions request offering one tool,
// and returns the text of the answer.
func askModel(base, key, model string) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"model": model, "stream": true, "stream_options": map[string]any{"include_usage": true},
		"messages": []map[string]any{{"role": "user", "content": "Add a short note under docs/."}},
		"tools": []map[string]any{{"type": "function", "function": map[string]any{"name": "write_file",
			"parameters": map[string]any{"type": "object", "properties": map[string]any{
				"file_path": map[string]any{"type": "string"}, "content": map[string]any{"type": "string"}}}}}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("HTTP %d, the answer broke off: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	if !bytes.Contains(data, []byte("[DONE]")) {
		return "", fmt.Errorf("the answer ended before [DONE]")
	}
	var text strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if d, ok := strings.CutPrefix(line, "data: "); ok && json.Unmarshal([]byte(d), &chunk) == nil {
			for _, c := range chunk.Choices {
				text.WriteString(c.Delta.Content)
			}
		}
	}
	return text.String(), nil
}

// agentAnswered makes the canned change and reports a successful result.
func agentAnswered(out *json.Encoder, stderr io.Writer, getenv func(string) string, attempts int, text string) int {
	data, err := os.ReadFile(getenv("CASE_TASK_FILE"))
	var contract task.Contract
	if err == nil {
		err = json.Unmarshal(data, &contract)
	}
	root, werr := os.Getwd()
	if err == nil {
		err = werr
	}
	var path string
	if err == nil {
		path, err = Apply(contract, root)
	}
	if err != nil {
		return agentFailed(out, stderr, attempts, "the change could not be made: "+err.Error())
	}
	_ = out.Encode(map[string]any{"type": "assistant", "message": map[string]any{"content": []map[string]any{
		{"type": "text", "text": fmt.Sprintf("The model answered %q after %d request(s); I added a note to %s.", text, attempts, path)}}}})
	_ = out.Encode(map[string]any{"type": "result", "subtype": "success", "is_error": false, "num_turns": 1,
		"result": "Added the note."})
	return 0
}

// agentFailed reports an error result, as qwen-code does when it gives up.
func agentFailed(out *json.Encoder, stderr io.Writer, attempts int, msg string) int {
	fmt.Fprintln(stderr, "fake agent:", msg)
	_ = out.Encode(map[string]any{"type": "result", "subtype": "error_during_execution", "is_error": true,
		"num_turns": attempts, "error": map[string]any{"message": msg}})
	return 1
}
