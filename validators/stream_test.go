package validators

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScanFile(t *testing.T) {
	long := strings.Repeat("y", 600*1024) // longer than the reader's buffer
	tests := []struct {
		name    string
		content string
		want    []string
		wantErr string
	}{
		{"lines", "a\nbb\n", []string{"a", "bb"}, ""},
		{"empty file", "", nil, ""},
		{"carriage return dropped as bufio.ScanLines does", "a\r\nb\n", []string{"a", "b"}, ""},
		{"long line", "a\n" + long + "\nc\n", []string{"a", long, "c"}, ""},
		{"cut short", "a\nb", nil, "not terminated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
				t.Fatal(err)
			}
			var got []string
			err := scanFile(context.Background(), p, func(i int, line []byte) error {
				if i != len(got) {
					t.Fatalf("line index %d, want %d", i, len(got))
				}
				got = append(got, string(line))
				return nil
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
					t.Fatalf("want error %q before any line, got %v after %d lines", tc.wantErr, err, len(got))
				}
				return
			}
			if err != nil || strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("got %d lines, err %v", len(got), err)
			}
		})
	}
}

// TestScanFileStopsWhenCancelled: a long log is not read to its end once
// validation is cancelled.
func TestScanFileStopsWhenCancelled(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(strings.Repeat("{}\n", 100000)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := scanFile(ctx, p, func(i int, _ []byte) error {
		if n++; n == 5000 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, errInterrupted) || n > 5000+1024 {
		t.Fatalf("err %v after %d lines", err, n)
	}
}
