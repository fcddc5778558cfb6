package agent

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A kept workspace is scrubbed in chunks: a key split across two chunks is
// still replaced, nothing else changes, and no link is followed.
func TestScrubBeneath(t *testing.T) {
	r, err := NewRedactor(Secret{Var: "API_KEY", Value: "sk-secret-0123456789"}, Secret{Var: "OTHER", Value: "short-key"})
	if err != nil {
		t.Fatal(err)
	}
	root, outside := t.TempDir(), t.TempDir()
	key := "sk-secret-0123456789"
	// The key straddles the end of the first read (a chunk plus the longest
	// secret); the other secret sits at the very end.
	big := strings.Repeat("a", scrubChunk+len(key)-5) + key + strings.Repeat("b", 3*scrubChunk) + "short-key"
	if err := os.MkdirAll(filepath.Join(root, "home", ".agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	session := filepath.Join(root, "home", ".agent", "session.jsonl")
	if err := os.WriteFile(session, []byte(big), 0o600); err != nil {
		t.Fatal(err)
	}
	hostFile := filepath.Join(outside, "host.txt")
	if err := os.WriteFile(hostFile, []byte(key), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "home", "out")); err != nil {
		t.Fatal(err)
	}

	found, err := r.ScrubBeneath(root, "home/.agent/session.jsonl")
	if err != nil || !found {
		t.Fatalf("ScrubBeneath = %v, %v; want a secret found", found, err)
	}
	got, _ := os.ReadFile(session)
	want := strings.Repeat("a", scrubChunk+len(key)-5) + Marker("API_KEY") + strings.Repeat("b", 3*scrubChunk) + Marker("OTHER")
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("scrubbed file differs from the expected (%d bytes, want %d)", len(got), len(want))
	}
	if fi, _ := os.Stat(session); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	if _, err := r.ScrubBeneath(root, "home/out/host.txt"); err == nil {
		t.Error("a path through a symlink was opened")
	}
	if data, _ := os.ReadFile(hostFile); string(data) != key {
		t.Errorf("the file outside the root changed: %q", data)
	}
	clean := filepath.Join(root, "clean.txt")
	os.WriteFile(clean, []byte("nothing here"), 0o644)
	if found, err := r.ScrubBeneath(root, "clean.txt"); found || err != nil {
		t.Errorf("clean file: %v, %v", found, err)
	}
	if ents, _ := os.ReadDir(filepath.Join(root, "home", ".agent")); len(ents) != 1 {
		t.Errorf("the temporary file was left behind: %v", ents)
	}
}
