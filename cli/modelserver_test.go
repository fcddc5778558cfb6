package cli_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/cli"
)

// TestModelServerCommand starts `cto-harness modelserver`, plays one turn
// over HTTP, stops it as a signal would, and reads the recorded requests.
func TestModelServerCommand(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(`{"turns":[{"action":"shell","command":"make test"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	requests := filepath.Join(dir, "requests.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"modelserver", "--script", script, "--requests", requests}, outW, io.Discard, os.Getenv)
		outW.Close()
	}()
	url, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q (%v), want the server URL", url, err)
	}
	go io.Copy(io.Discard, out)
	body := `{"model":"m","messages":[{"role":"user","content":"go"}],"tools":[{"type":"function","function":{"name":"run_shell_command","parameters":{"type":"object","properties":{"command":{"type":"string"}}}}}]}`
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSpace(url)+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-cli-secret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || !strings.Contains(string(answer), `make test`) {
		t.Fatalf("answer %d %s", res.StatusCode, answer)
	}
	cancel()
	select {
	case code := <-done:
		if code != cli.ExitOK {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("modelserver did not stop when its context ended")
	}
	rec, err := os.ReadFile(requests)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(rec), "\n"); lines != 1 || strings.Contains(string(rec), "sk-cli-secret") || !strings.Contains(string(rec), `"turn":0`) {
		t.Fatalf("recorded requests (%d lines): %s", lines, rec)
	}
}
