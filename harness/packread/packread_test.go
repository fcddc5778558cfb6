package packread_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/cto-harness/cto-harness/harness/packread"
)

func gitIn(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "gc.auto=0", "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("git %v: %v\n%s", args, err, stderr)
	}
	return string(out)
}

// history is a repository of 40 commits over 30 files that change a line
// at a time (so a repack makes long delta chains), a symlink, a 3 MiB blob
// and a tag.
func history(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	gitIn(t, dir, "init", "-q", "-b", "main")
	rng := rand.New(rand.NewSource(1))
	lines := make([][]string, 30)
	for i := range lines {
		for j := range 200 {
			lines[i] = append(lines[i], fmt.Sprintf("file %d line %d: %d", i, j, rng.Int()))
		}
	}
	for c := range 40 {
		for i := range lines {
			if (i+c)%3 == 0 {
				lines[i][rng.Intn(len(lines[i]))] = fmt.Sprintf("commit %d changed this", c)
			}
			p := filepath.Join(dir, fmt.Sprintf("d%d", i%4), fmt.Sprintf("f%d.txt", i))
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(strings.Join(lines[i], "\n")+"\n"), 0o644)
		}
		if c == 5 {
			os.Symlink("d0/f0.txt", filepath.Join(dir, "link"))
			big := make([]byte, 3<<20)
			rng.Read(big)
			os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644)
		}
		gitIn(t, dir, "add", "-A")
		gitIn(t, dir, "commit", "-q", "-m", fmt.Sprintf("commit %d", c))
	}
	gitIn(t, dir, "tag", "-a", "-m", "a tag", "v1")
	return dir
}

// catAll is every object of the repository as git reads it.
func catAll(t testing.TB, dir string) map[plumbing.Hash]struct {
	typ  string
	data []byte
} {
	t.Helper()
	out := gitIn(t, dir, "cat-file", "--batch-all-objects", "--batch")
	r := bufio.NewReader(strings.NewReader(out))
	all := map[plumbing.Hash]struct {
		typ  string
		data []byte
	}{}
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			break
		}
		f := strings.Fields(line)
		n, _ := strconv.Atoi(f[2])
		data := make([]byte, n+1)
		if _, err := io.ReadFull(r, data); err != nil {
			t.Fatal(err)
		}
		all[plumbing.NewHash(f[0])] = struct {
			typ  string
			data []byte
		}{f[1], data[:n]}
	}
	if len(all) < 100 {
		t.Fatalf("only %d objects", len(all))
	}
	return all
}

// readsLikeGit reads every object git lists through Objects and holds each
// to git's type and content.
func readsLikeGit(t *testing.T, dir string) {
	t.Helper()
	want := catAll(t, dir)
	o, err := packread.Open(filepath.Join(dir, ".git", "objects"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	for h, w := range want {
		obj, err := o.Read(h)
		if err != nil {
			t.Fatalf("read %s: %v", h, err)
		}
		r, err := obj.Reader()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("read %s: %v", h, err)
		}
		if obj.Type().String() != w.typ || !bytes.Equal(got, w.data) || obj.Size() != int64(len(w.data)) || obj.Hash() != h {
			t.Fatalf("%s: got %s of %d bytes, git reads %s of %d", h, obj.Type(), len(got), w.typ, len(w.data))
		}
		if ok, err := o.Has(h); !ok || err != nil {
			t.Fatalf("Has(%s) = %v, %v", h, ok, err)
		}
	}
	missing := plumbing.NewHash("0123456789012345678901234567890123456789")
	if _, err := o.Read(missing); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Fatalf("a missing object: %v", err)
	}
	if ok, _ := o.Has(missing); ok {
		t.Fatal("Has finds a missing object")
	}
}

func packsOf(t testing.TB, dir string) []string {
	m, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "pack-*.pack"))
	return m
}

func TestReadsLikeGit(t *testing.T) {
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string)
	}{
		{"loose", func(t *testing.T, dir string) {}},
		{"offset deltas", func(t *testing.T, dir string) { gitIn(t, dir, "repack", "-adfq", "--depth=50", "--window=50") }},
		{"ref deltas", func(t *testing.T, dir string) {
			gitIn(t, dir, "-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq", "--depth=50", "--window=50")
		}},
		{"index version 1", func(t *testing.T, dir string) { gitIn(t, dir, "-c", "pack.indexVersion=1", "repack", "-adfq") }},
		{"64-bit offsets", func(t *testing.T, dir string) {
			gitIn(t, dir, "repack", "-adfq")
			for _, p := range packsOf(t, dir) {
				idx := strings.TrimSuffix(p, ".pack") + ".idx"
				os.Chmod(idx, 0o644)
				gitIn(t, dir, "index-pack", "--index-version=2,64", "-o", idx+".new", p)
				os.Rename(idx+".new", idx)
			}
		}},
		{"packed and loose", func(t *testing.T, dir string) {
			gitIn(t, dir, "repack", "-adq")
			os.WriteFile(filepath.Join(dir, "new.txt"), []byte("after the repack\n"), 0o644)
			gitIn(t, dir, "add", "-A")
			gitIn(t, dir, "commit", "-q", "-m", "loose")
		}},
	}
	base := history(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "repo")
			if err := exec.Command("cp", "-a", base, dir).Run(); err != nil {
				t.Fatal(err)
			}
			c.setup(t, dir)
			readsLikeGit(t, dir)
		})
	}
}

// TestDamageIsAnError damages a pack's data, its index's names, and a
// loose object, and holds every read to an error wrapping ErrMalformed (or
// not found), never another object and never a panic.
func TestDamageIsAnError(t *testing.T) {
	dir := history(t)
	gitIn(t, dir, "repack", "-adq")
	want := catAll(t, dir)
	pack := packsOf(t, dir)[0]
	idx := strings.TrimSuffix(pack, ".pack") + ".idx"

	t.Run("pack data", func(t *testing.T) {
		data, _ := os.ReadFile(pack)
		for k := 0; k < 64; k++ {
			d := bytes.Clone(data)
			at := 12 + (len(d)-32)*k/64
			d[at] ^= 0x5a
			os.Chmod(pack, 0o644)
			os.WriteFile(pack, d, 0o644)
			o, err := packread.Open(filepath.Join(dir, ".git", "objects"))
			if err != nil {
				t.Fatal(err)
			}
			for h, w := range want {
				obj, err := o.Read(h)
				if err != nil {
					if !errors.Is(err, packread.ErrMalformed) {
						t.Fatalf("byte %d: read %s: %v (not ErrMalformed)", at, h, err)
					}
					continue
				}
				r, _ := obj.Reader()
				got, err := io.ReadAll(r)
				if err == nil && !bytes.Equal(got, w.data) {
					t.Fatalf("byte %d: %s read as other content without an error", at, h)
				}
			}
			o.Close()
		}
		os.WriteFile(pack, data, 0o644)
	})
	t.Run("index names", func(t *testing.T) {
		data, _ := os.ReadFile(idx)
		d := bytes.Clone(data)
		for i := 8 + 1024; i < 8+1024+20*200 && i < len(d)-40; i += 7 {
			d[i] ^= 0xff
		}
		os.Chmod(idx, 0o644)
		os.WriteFile(idx, d, 0o644)
		o, err := packread.Open(filepath.Join(dir, ".git", "objects"))
		if err != nil {
			t.Fatal(err)
		}
		for h := range want {
			if _, err := o.Read(h); err != nil && !errors.Is(err, packread.ErrMalformed) && !errors.Is(err, plumbing.ErrObjectNotFound) {
				t.Fatalf("read %s: %v", h, err)
			}
		}
		o.Close()
		os.WriteFile(idx, data[:len(data)-7], 0o644)
		if _, err := packread.Open(filepath.Join(dir, ".git", "objects")); !errors.Is(err, packread.ErrMalformed) {
			t.Fatalf("a truncated index opens: %v", err)
		}
		os.WriteFile(idx, data, 0o644)
	})
	t.Run("loose object", func(t *testing.T) {
		os.WriteFile(filepath.Join(dir, "z.txt"), []byte("loose\n"), 0o644)
		h := plumbing.NewHash(strings.TrimSpace(gitIn(t, dir, "hash-object", "-w", "z.txt")))
		other := plumbing.NewHash(strings.TrimSpace(gitIn(t, dir, "hash-object", "-w", "--stdin")))
		s := h.String()
		p := filepath.Join(dir, ".git", "objects", s[:2], s[2:])
		o2 := other.String()
		data, _ := os.ReadFile(filepath.Join(dir, ".git", "objects", o2[:2], o2[2:]))
		os.Chmod(p, 0o644)
		os.WriteFile(p, data, 0o644) // another object's bytes under this id
		o, err := packread.Open(filepath.Join(dir, ".git", "objects"))
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		if _, err := o.Read(h); !errors.Is(err, packread.ErrMalformed) {
			t.Fatalf("a loose object holding another's content: %v", err)
		}
	})
}

// TestStorerServesGoGit opens a store through go-git with its object reads
// served in place, from its own directory and a second one (as a store
// reads its shared closure), and walks the history and trees as git does.
func TestStorerServesGoGit(t *testing.T) {
	dir := history(t)
	gitIn(t, dir, "repack", "-adq")
	objects := len(catAll(t, dir))
	var want []string
	for _, l := range strings.Split(strings.TrimSpace(gitIn(t, dir, "ls-tree", "-r", "HEAD")), "\n") {
		f := strings.Fields(l)
		want = append(want, f[2]+" "+f[3])
	}
	// A second objects directory holds the packs; the first only what
	// is written after.
	shared := filepath.Join(t.TempDir(), "objects")
	os.MkdirAll(shared, 0o755)
	if err := os.Rename(filepath.Join(dir, ".git", "objects", "pack"), filepath.Join(shared, "pack")); err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, ".git", "objects", "pack"), 0o755)
	gitDir := filepath.Join(dir, ".git")
	objs, err := packread.Open(shared, filepath.Join(gitDir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	st := &packread.Storer{Storage: filesystem.NewStorage(osfs.New(gitDir), cache.NewObjectLRUDefault()), Objects: objs}
	defer st.Close()
	r, err := git.Open(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	head, err := r.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ; ; n++ {
		if len(c.ParentHashes) == 0 {
			break
		}
		if c, err = c.Parent(0); err != nil {
			t.Fatal(err)
		}
	}
	if n != 39 {
		t.Fatalf("walked %d parents, the history has 39", n)
	}
	top, err := r.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	tree, err := r.TreeObject(top.TreeHash)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	tree.Files().ForEach(func(f *object.File) error { got = append(got, f.Hash.String()+" "+f.Name); return nil })
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("go-git through Storer lists\n%s\ngit lists\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// A blob written through the storage is read back in place.
	obj := st.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, _ := obj.Writer()
	w.Write([]byte("written after Open\n"))
	w.Close()
	h, err := st.SetEncodedObject(obj)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.HasEncodedObject(h); err != nil {
		t.Fatalf("the written object: %v", err)
	}
	all, err := st.IterEncodedObjects(plumbing.AnyObject)
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	all.ForEach(func(plumbing.EncodedObject) error { count++; return nil })
	if want := objects + 1; count != want {
		t.Fatalf("iterated %d objects, the two directories hold %d", count, want)
	}
}

// TestConcurrentReads reads every object from four goroutines at once
// through one Objects (its base cache shared), each holding what it reads
// to git's.
func TestConcurrentReads(t *testing.T) {
	dir := history(t)
	gitIn(t, dir, "repack", "-adfq", "--depth=50", "--window=50")
	want := catAll(t, dir)
	o, err := packread.Open(filepath.Join(dir, ".git", "objects"))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	errs := make(chan error, 4)
	for range 4 {
		go func() {
			for h, w := range want {
				obj, err := o.Read(h)
				if err != nil {
					errs <- err
					return
				}
				r, _ := obj.Reader()
				got, err := io.ReadAll(r)
				r.Close()
				if err != nil || !bytes.Equal(got, w.data) {
					errs <- fmt.Errorf("%s: %v, %d bytes, git reads %d", h, err, len(got), len(w.data))
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// IndexNames lists what git show-index lists, and refuses an index whose
// names are out of order (a damaged one a lookup would misread).
func TestIndexNames(t *testing.T) {
	dir := history(t)
	gitIn(t, dir, "repack", "-adq")
	idx := strings.TrimSuffix(packsOf(t, dir)[0], ".pack") + ".idx"
	got, err := packread.IndexNames(idx)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(idx)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "show-index")
	cmd.Stdin = f
	out, err := cmd.Output()
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for line := range strings.Lines(string(out)) {
		want = append(want, strings.Fields(line)[1])
	}
	sort.Strings(want)
	if len(got) != len(want) {
		t.Fatalf("%d names, git lists %d", len(got), len(want))
	}
	for i := range got {
		if got[i].String() != want[i] {
			t.Fatalf("name %d is %s, git lists %s", i, got[i], want[i])
		}
	}
	data, _ := os.ReadFile(idx)
	names := 8 + 256*4
	copy(data[names:names+20], data[names+20:names+40]) // the first name repeats the second
	os.Chmod(idx, 0o644)
	if err := os.WriteFile(idx, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := packread.IndexNames(idx); !errors.Is(err, packread.ErrMalformed) {
		t.Fatalf("an index with names out of order: %v, want ErrMalformed", err)
	}
}
