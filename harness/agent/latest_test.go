package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestLatest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.EscapedPath() != "/@anthropic-ai%2Fclaude-code/latest" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(`{"name":"@anthropic-ai/claude-code","version":"2.1.400"}`))
	}))
	defer srv.Close()
	v, err := Latest(context.Background(), srv.URL, "@anthropic-ai/claude-code")
	if err != nil || v != "2.1.400" {
		t.Fatalf("latest %q %v", v, err)
	}
	if _, err := Latest(context.Background(), srv.URL, "@no/such"); err == nil {
		t.Fatal("a 404 gave a version")
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{{"2.1.331", "2.1.328", true}, {"2.1.328", "2.1.331", false}, {"0.24.4", "0.24.4", false}, {"1.0.0", "0.99.9", true}, {"0.170.0-beta.1", "0.169.0", true}} {
		if got := Newer(c.a, c.b); got != c.want {
			t.Errorf("Newer(%s, %s) = %v", c.a, c.b, got)
		}
	}
}
