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
	var stderr strings.Builder
	out, outW := io.Pipe()
	done := make(chan int, 1)
	go func() {
		done <- cli.Main(ctx, []string{"modelserver", "--script", script, "--requests", requests, "--log"}, outW, &stderr, os.Getenv)
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
	if want := "modelserver: POST /v1/chat/completions (openai-chat) turn 1 -> 200\n"; stderr.String() != want {
		t.Fatalf("--log printed %q, want %q", stderr.String(), want)
	}
	rec, err := os.ReadFile(requests)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Count(string(rec), "\n"); lines != 1 || strings.Contains(string(rec), "sk-cli-secret") || !strings.Contains(string(rec), `"turn":0`) {
		t.Fatalf("recorded requests (%d lines): %s", lines, rec)
	}
}

// The exit-code rule holds for modelserver: a script, flag or address it
// cannot use is bad input (2), and nothing is served.
func TestModelServerExitCodes(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	good := filepath.Join(dir, "good.json")
	os.WriteFile(bad, []byte(`{"turns":[{"action":"write"}]}`), 0o644)
	os.WriteFile(good, []byte(`{"turns":[]}`), 0o644)
	for _, args := range [][]string{
		{"modelserver"},
		{"modelserver", "--script", filepath.Join(dir, "absent.json")},
		{"modelserver", "--script", bad},
		{"modelserver", "--script", good, "--listen", "256.0.0.1:bad"},
	} {
		var errOut strings.Builder
		if got := cli.Main(context.Background(), args, io.Discard, &errOut, os.Getenv); got != cli.ExitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %q)", args, got, cli.ExitUsage, errOut.String())
		}
	}
}

// Recorded requests that cannot be written make the command fail (1).
func TestModelServerRequestsUnwritable(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	os.WriteFile(good, []byte(`{"turns":[]}`), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve nothing, stop at once
	var errOut strings.Builder
	args := []string{"modelserver", "--script", good, "--requests", filepath.Join(dir, "no", "such", "dir", "r.jsonl")}
	if got := cli.Main(ctx, args, io.Discard, &errOut, os.Getenv); got != cli.ExitFailed || !strings.Contains(errOut.String(), "recorded requests") {
		t.Fatalf("exit %d, stderr %q; want %d and a message about the recorded requests", got, errOut.String(), cli.ExitFailed)
	}
}
