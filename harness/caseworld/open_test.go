package caseworld

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestOpenIsConfined(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600))
	must(os.MkdirAll(filepath.Join(root, "dir"), 0o755))
	must(os.WriteFile(filepath.Join(root, "dir", "ok.txt"), []byte("fine"), 0o644))
	must(os.Symlink(outside, filepath.Join(root, "linkdir")))
	must(os.Symlink(filepath.Join(outside, "secret"), filepath.Join(root, "link")))
	must(os.Symlink("ok.txt", filepath.Join(root, "dir", "inner")))
	must(syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644))

	f, err := Open(root, "dir/ok.txt")
	must(err)
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "fine" {
		t.Fatalf("read %q, want fine", data)
	}
	for _, rel := range []string{"linkdir/secret", "link", "dir/inner", "../" + filepath.Base(outside) + "/secret", "dir/../../x", "/etc/passwd"} {
		if f, err := Open(root, rel); err == nil {
			f.Close()
			t.Errorf("Open(%q) followed a path out of the root or through a link", rel)
		}
	}
	// A FIFO is never opened for reading: the call returns at once.
	done := make(chan error, 1)
	go func() {
		f, err := Open(root, "fifo")
		if f != nil {
			f.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotRegular) {
			t.Fatalf("Open(fifo) = %v, want ErrNotRegular", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open(fifo) blocked")
	}
	if _, err := Open(root, "dir"); !errors.Is(err, ErrNotRegular) {
		t.Fatalf("Open(dir) = %v, want ErrNotRegular", err)
	}
}
