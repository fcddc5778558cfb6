package source_test

import (
	"context"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cto-harness/cto-harness/harness/source"
)

// A tree whose deepest path, with the root in front, is longer than
// PATH_MAX (while the path relative to the root, which git uses, is not)
// is listed whole: every entry is reached through its directory's
// descriptor, never by its full path.
func TestManifestPastPathMax(t *testing.T) {
	root := t.TempDir()
	deep := strings.Repeat(strings.Repeat("d", 199)+"/", 21)
	fd, err := unix.Open(root, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(deep, "/"), "/") {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		unix.Close(fd)
		if err != nil {
			t.Fatal(err)
		}
		fd = next
	}
	f, err := unix.Openat(fd, "leaf.txt", unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	unix.Write(f, []byte("deep\n"))
	unix.Close(f)
	if err := unix.Symlinkat("leaf.txt", fd, "link"); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if len(root)+len(deep) <= unix.PathMax {
		t.Fatalf("the tree is not deep enough: %d bytes", len(root)+len(deep))
	}
	entries, err := source.Manifest(context.Background(), root)
	if err != nil {
		t.Fatal(err)
	}
	var leaf, link bool
	for _, e := range entries {
		leaf = leaf || (e.Path == deep+"leaf.txt" && e.Size == 5)
		link = link || (e.Path == deep+"link" && e.Target() == "leaf.txt")
	}
	if len(entries) != 1+21+2 || !leaf || !link {
		t.Fatalf("%d entries (want 24), leaf %v, link %v", len(entries), leaf, link)
	}
}
