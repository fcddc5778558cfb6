// Package cdp drives a headless Chromium over the DevTools protocol on a
// pipe (--remote-debugging-pipe), with no dependency beyond the standard
// library. The run page's browser tests use it to load report.html from
// file://, read what is rendered, collect console messages and take
// screenshots.
package cdp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Flags are the Chromium flags every launch uses: headless, no GPU, no
// background traffic, no first-run work.
func Flags() []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--enable-logging=stderr", "--v=0", "--remote-debugging-pipe"}
}

// Find returns the Chromium executable, or "" when none is installed.
func Find() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// Browser is one running Chromium.
type Browser struct {
	cmd     *exec.Cmd
	w       *os.File
	stderr  *lockedBuf
	mu      sync.Mutex
	next    int
	pending map[int]chan message
	console map[string][]string // per session: console and log messages
	loaded  map[string]chan struct{}
	done    chan struct{}
	readErr error
}

type message struct {
	ID        int                       `json:"id,omitempty"`
	Method    string                    `json:"method,omitempty"`
	Params    json.RawMessage           `json:"params,omitempty"`
	Result    json.RawMessage           `json:"result,omitempty"`
	Error     *struct{ Message string } `json:"error,omitempty"`
	SessionID string                    `json:"sessionId,omitempty"`
}

// Launch starts Chromium with a fresh profile in userDataDir.
func Launch(ctx context.Context, exe, userDataDir string) (*Browser, error) {
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	respR, respW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe, append(Flags(), "--user-data-dir="+userDataDir, "about:blank")...)
	cmd.ExtraFiles = []*os.File{cmdR, respW} // fd 3: commands in, fd 4: replies out
	b := &Browser{cmd: cmd, w: cmdW, stderr: &lockedBuf{}, pending: map[int]chan message{}, console: map[string][]string{},
		loaded: map[string]chan struct{}{}, done: make(chan struct{})}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", exe, err)
	}
	cmdR.Close()
	respW.Close()
	go b.read(respR)
	return b, nil
}

func (b *Browser) read(r *os.File) {
	defer close(b.done)
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.readErr = err
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(bytes.TrimSuffix(raw, []byte{0}), &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else {
			b.event(m)
		}
		b.mu.Unlock()
	}
}

// event records console output and load events; called with mu held.
func (b *Browser) event(m message) {
	switch m.Method {
	case "Page.loadEventFired":
		if ch, ok := b.loaded[m.SessionID]; ok {
			close(ch)
			delete(b.loaded, m.SessionID)
		}
	case "Runtime.consoleAPICalled":
		var p struct {
			Type string
			Args []struct {
				Value       any
				Description string
			}
		}
		_ = json.Unmarshal(m.Params, &p)
		var parts []string
		for _, a := range p.Args {
			parts = append(parts, fmt.Sprint(a.Value, a.Description))
		}
		b.console[m.SessionID] = append(b.console[m.SessionID], "console."+p.Type+": "+strings.Join(parts, " "))
	case "Runtime.exceptionThrown":
		var p struct {
			ExceptionDetails struct{ Text string } `json:"exceptionDetails"`
		}
		_ = json.Unmarshal(m.Params, &p)
		b.console[m.SessionID] = append(b.console[m.SessionID], "exception: "+p.ExceptionDetails.Text)
	case "Log.entryAdded":
		var p struct {
			Entry struct{ Source, Level, Text, URL string }
		}
		_ = json.Unmarshal(m.Params, &p)
		b.console[m.SessionID] = append(b.console[m.SessionID], fmt.Sprintf("log.%s (%s): %s %s", p.Entry.Level, p.Entry.Source, p.Entry.Text, p.Entry.URL))
	}
}

func (b *Browser) call(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	if params == nil {
		params = struct{}{}
	}
	ch := make(chan message, 1)
	b.mu.Lock()
	if b.readErr != nil {
		b.mu.Unlock()
		return nil, fmt.Errorf("%s: the browser is gone: %w", method, b.readErr)
	}
	b.next++
	id := b.next
	b.pending[id] = ch
	b.mu.Unlock()
	data, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params, "sessionId": session})
	if err != nil {
		return nil, err
	}
	if session == "" {
		data, _ = json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	}
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("%s: the browser closed the pipe; its log:\n%s", method, b.Log())
		}
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	}
}

// Log is what Chromium wrote on stderr.
func (b *Browser) Log() string { return b.stderr.String() }

// Close ends the browser.
func (b *Browser) Close() {
	_, _ = b.call(context.Background(), "", "Browser.close", nil)
	b.w.Close()
	done := make(chan struct{})
	go func() { _ = b.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = b.cmd.Process.Kill()
		<-done
	}
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// Open makes a tab of the given size, loads url and waits for its load event.
func (b *Browser) Open(ctx context.Context, url string, width, height int) (*Page, error) {
	res, err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"})
	if err != nil {
		return nil, err
	}
	var t struct{ TargetID string }
	_ = json.Unmarshal(res, &t)
	res, err = b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true})
	if err != nil {
		return nil, err
	}
	var a struct{ SessionID string }
	_ = json.Unmarshal(res, &a)
	p := &Page{b: b, session: a.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable"} {
		if _, err := b.call(ctx, p.session, m, nil); err != nil {
			return nil, err
		}
	}
	if err := p.Resize(ctx, width, height); err != nil {
		return nil, err
	}
	loaded := make(chan struct{})
	b.mu.Lock()
	b.loaded[p.session] = loaded
	b.mu.Unlock()
	res, err = b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url})
	if err != nil {
		return nil, err
	}
	var nav struct{ ErrorText string }
	_ = json.Unmarshal(res, &nav)
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("navigate to %s: %s", url, nav.ErrorText)
	}
	select {
	case <-loaded:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s did not finish loading: %w", url, ctx.Err())
	}
	return p, nil
}

// Resize sets the viewport.
func (p *Page) Resize(ctx context.Context, width, height int) error {
	_, err := p.b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false})
	return err
}

// Eval evaluates a JavaScript expression in the page and decodes its
// (JSON-serializable) value into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	res, err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true})
	if err != nil {
		return err
	}
	var r struct {
		Result           struct{ Value json.RawMessage }
		ExceptionDetails *struct{ Text string }
	}
	if err := json.Unmarshal(res, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("evaluate: %s", r.ExceptionDetails.Text)
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Console returns the console messages, exceptions and log entries so far.
func (p *Page) Console() []string {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	return append([]string(nil), p.b.console[p.session]...)
}

// Screenshot writes a PNG of the page; full captures beyond the viewport.
func (p *Page) Screenshot(ctx context.Context, path string, full bool) error {
	res, err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": full})
	if err != nil {
		return err
	}
	var s struct{ Data string }
	if err := json.Unmarshal(res, &s); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(s.Data)
	if err != nil {
		return err
	}
	if len(png) == 0 {
		return errors.New("empty screenshot")
	}
	return os.WriteFile(path, png, 0o644)
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// EmulateMedia switches the page's CSS media type ("print", "screen" or "").
func (p *Page) EmulateMedia(ctx context.Context, media string) error {
	_, err := p.b.call(ctx, p.session, "Emulation.setEmulatedMedia", map[string]any{"media": media})
	return err
}

// PDF prints the page to a PDF file, as the browser's print would.
func (p *Page) PDF(ctx context.Context, path string) error {
	res, err := p.b.call(ctx, p.session, "Page.printToPDF", map[string]any{"printBackground": true})
	if err != nil {
		return err
	}
	var s struct{ Data string }
	if err := json.Unmarshal(res, &s); err != nil {
		return err
	}
	pdf, err := base64.StdEncoding.DecodeString(s.Data)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF")) {
		return errors.New("the printed document is not a PDF")
	}
	return os.WriteFile(path, pdf, 0o644)
}
