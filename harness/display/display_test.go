package display_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cto-harness/cto-harness/harness/display"
)

// forgedPass is a file name that, printed raw on a terminal, erases the line
// and paints a green PASS over a blocked run.
const forgedPass = "docs/x\x1b[2K\r\x1b[32mrun: PASS\x1b[0m\n.md"

func TestTerminalEscapesEveryHiddenCharacter(t *testing.T) {
	cases := map[string]string{
		"docs/notes.md":                    "docs/notes.md",
		"docs/café.md":                     "docs/café.md",
		`docs/say "hi".md`:                 `docs/say "hi".md`,
		forgedPass:                         `docs/x\x1b[2K\x0d\x1b[32mrun: PASS\x1b[0m\x0a.md`,
		"a\u202egnp.exe":                   `a\u202egnp.exe`,
		"a\u2066b\u2069\u200e\u200f\u061c": `a\u2066b\u2069\u200e\u200f\u061c`,
		"del\x7f c1\u009b zw\u200b":        `del\x7f c1\x9b zw\u200b`,
		"raw\x9b[31m bad\xff":              `raw\x9b[31m bad\xff`,
		"tag\U000E0041":                    `tag\U000e0041`,
		"line\u2028sep":                    `line\u2028sep`,
	}
	for in, want := range cases {
		got := display.Terminal(in)
		if got != want {
			t.Errorf("Terminal(%q) = %q, want %q", in, got, want)
		}
		for _, r := range got {
			if display.Hidden(r) {
				t.Errorf("Terminal(%q) still holds %U", in, r)
			}
		}
		if !utf8.ValidString(got) {
			t.Errorf("Terminal(%q) is not UTF-8", in)
		}
	}
}

func TestBidiIsHidden(t *testing.T) {
	for _, r := range []rune{'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u200e', '\u200f', '\u061c'} {
		if !display.Bidi(r) || !display.Hidden(r) {
			t.Errorf("%U: Bidi %v, Hidden %v", r, display.Bidi(r), display.Hidden(r))
		}
	}
	if display.Hidden('é') || display.Hidden('"') || display.Bidi('a') {
		t.Error("ordinary characters count as hidden")
	}
}

func TestMarkdownTextCannotStartALineOrATag(t *testing.T) {
	in := "docs/a.md\n\n## Status: PASS\r\n<img src=x onerror=alert(1)> `code` *b* [l](u) a|b & c\\"
	got := display.MarkdownText(in)
	if strings.ContainsAny(got, "\n\r<>") {
		t.Fatalf("MarkdownText left a line break or a tag: %q", got)
	}
	for _, want := range []string{`\\x0a\\x0a## Status: PASS`, "&lt;img src=x onerror=alert(1)&gt;", "\\`code\\`", `\*b\*`, `\[l\](u)`, `a\|b`, "&amp; c", `c\\`} {
		if !strings.Contains(got, want) {
			t.Errorf("MarkdownText(%q) = %q, lacks %q", in, got, want)
		}
	}
}

func TestMarkdownCodeCannotBeClosed(t *testing.T) {
	cases := map[string]string{
		"docs/a.md":      "`docs/a.md`",
		"docs/a`b.md":    "``docs/a`b.md``",
		"`x``":           "``` `x`` ```",
		"a\n## PASS <b>": "`a\\x0a## PASS <b>`",
		"a\u202eb":       "`a\\u202eb`",
	}
	for in, want := range cases {
		if got := display.MarkdownCode(in); got != want {
			t.Errorf("MarkdownCode(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMarkHTML(t *testing.T) {
	page := "<html><head><title>a\u202eb</title><style>x{}</style></head><body>\n" +
		"<a href=\"#f\" title=\"n\u202eame\">docs/\u202etxt.md</a>\t<pre>log\x1b[31m red\r\nnext\xff</pre></body></html>"
	got := string(display.MarkHTML([]byte(page)))
	for _, want := range []string{
		`<title>a\u202eb</title>`,
		`title="n\u202eame"`,
		`docs/<span class="hidden-char" title="hidden character">\u202e</span>txt.md`,
		`log<span class="hidden-char" title="hidden character">\x1b</span>[31m red` + "\r\nnext",
		`<span class="hidden-char" title="hidden character">\xff</span></pre>`,
		"<body>\n<a", "</a>\t<pre>",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("MarkHTML lacks %q:\n%s", want, got)
		}
	}
	for _, r := range got {
		if display.Hidden(r) && r != '\n' && r != '\t' && r != '\r' {
			t.Errorf("MarkHTML left %U", r)
		}
	}
}

func TestJSONKeepsMeaningAndHidesNothing(t *testing.T) {
	in := map[string]string{"path": "docs/\u202etxt.md\x1b[31m\U000E0041\u00e9"}
	raw, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	got := display.JSON(raw)
	for _, r := range string(got) {
		if display.Hidden(r) {
			t.Errorf("JSON left %U in %s", r, got)
		}
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["path"] != in["path"] {
		t.Errorf("JSON changed the meaning: %s -> %q, %v", got, back["path"], err)
	}
	if !strings.Contains(string(got), `\u202e`) || !strings.Contains(string(got), "é") {
		t.Errorf("JSON = %s", got)
	}
}
