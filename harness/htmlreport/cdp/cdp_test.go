package cdp_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/htmlreport/cdp"
)

// The client sees rendered text, console errors and blocked loads, so the
// page tests that rely on it can fail.
func TestClientSeesTextAndConsoleErrors(t *testing.T) {
	exe := cdp.Find()
	if exe == "" {
		t.Skip("chromium is not installed (Debian: apt-get install chromium); the browser tests need it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	page := filepath.Join(dir, "p.html")
	html := `<!DOCTYPE html><meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'">
<p id="shown">visible text</p><p style="display:none">hidden text</p>
<img src="https://example.invalid/x.png"><script>console.error("boom")</script>`
	if err := os.WriteFile(page, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := cdp.Launch(ctx, exe, filepath.Join(dir, "profile"))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := b.Open(ctx, "file://"+page, 800, 600)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.Log())
	}
	var text string
	if err := p.Eval(ctx, "document.body.innerText", &text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "visible text") || strings.Contains(text, "hidden text") {
		t.Fatalf("rendered text %q", text)
	}
	time.Sleep(200 * time.Millisecond)
	msgs := strings.Join(p.Console(), "\n")
	if !strings.Contains(msgs, "boom") {
		t.Errorf("console.error not seen: %q", msgs)
	}
	if !strings.Contains(msgs, "example.invalid") {
		t.Errorf("the refused image load not seen: %q", msgs)
	}
	shot := filepath.Join(dir, "p.png")
	if err := p.Screenshot(ctx, shot, false); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(shot); err != nil || st.Size() < 100 {
		t.Fatalf("screenshot: %v", err)
	}
}
