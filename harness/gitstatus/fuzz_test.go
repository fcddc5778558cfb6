package gitstatus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
)

// linkExtension is a "link" extension naming a shared index, with an
// EWAH bitmap of one literal word for deletions and one for replacements.
func linkExtension(del, repl uint64) []byte {
	var ext []byte
	ext = append(ext, bytes.Repeat([]byte{0xab}, 20)...)
	for _, w := range []uint64{del, repl} {
		ext = binary.BigEndian.AppendUint32(ext, 64)    // bits
		ext = binary.BigEndian.AppendUint32(ext, 2)     // words
		ext = binary.BigEndian.AppendUint64(ext, 1<<33) // RLW: no run, one literal
		ext = binary.BigEndian.AppendUint64(ext, w)     // the literal
		ext = binary.BigEndian.AppendUint32(ext, 0)     // RLW position
	}
	return ext
}

func appendExtension(b []byte, sig string, ext []byte) []byte {
	body := append([]byte(nil), b[:len(b)-20]...)
	body = append(body, sig...)
	body = binary.BigEndian.AppendUint32(body, uint32(len(ext)))
	body = append(body, ext...)
	return resum(body)
}

// FuzzDecodeIndex checks that no input makes the full index decoder (all
// stages, flags, split and sparse extensions) panic, and that whatever it
// cannot read is ErrFallback.
func FuzzDecodeIndex(f *testing.F) {
	for _, version := range []uint32{2, 3, 4} {
		idx := &index.Index{Version: version}
		for i, n := range []string{"a", "b/c", "b/d", "e"} {
			e := idx.Add(n)
			e.Mode = filemode.Regular
			e.ModifiedAt = time.Unix(1700000000, 5)
			if version >= 3 {
				e.IntentToAdd = i == 1
				e.SkipWorktree = i == 2
			}
			e.Stage = index.Stage(i % 2)
		}
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
		f.Add(appendExtension(buf.Bytes(), "link", linkExtension(0b101, 0b10)))
		f.Add(appendExtension(buf.Bytes(), "sdir", nil))
	}
	f.Add(rawIndex("a", "b"))
	for _, version := range []uint32{2, 4} {
		idx := &index.Index{Version: version}
		for _, n := range []string{"a.b", "a/b/c", "a/d", "a0", "z/y"} {
			idx.Add(n).Mode = filemode.Regular
		}
		var buf bytes.Buffer
		if err := index.NewEncoder(&buf).Encode(idx); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 20 {
			data = resum(data[:len(data)-20])
		}
		// The plain route's tree hash, computed as the index is read,
		// accepts what parseIndex accepts and agrees with its entries.
		plain, perr := parseIndex(bytes.NewReader(data), int64(len(data)))
		h, herr := indexTreeHash(bytes.NewReader(data), int64(len(data)))
		switch {
		case (perr == nil) != (herr == nil):
			t.Fatalf("parseIndex: %v; hashed as read: %v", perr, herr)
		case herr != nil && !errors.Is(herr, ErrFallback):
			t.Fatalf("hashed as read: %v is not ErrFallback", herr)
		case perr == nil && h != TreeHash(plain):
			t.Fatalf("hashed as read %s, TreeHash of parseIndex's entries %s", h, TreeHash(plain))
		}
		got, err := decodeIndex(data)
		if err != nil {
			if !errors.Is(err, ErrFallback) {
				t.Fatalf("error %v is not ErrFallback", err)
			}
			return
		}
		for _, e := range got.entries {
			if e.Stage > 3 {
				t.Fatalf("stage %d", e.Stage)
			}
			if e.Name == "" && got.link == nil {
				t.Fatal("empty name outside a split index")
			}
		}
	})
}

// FuzzIgnoreFile checks that no ignore file or path makes the parser or
// the matcher panic, and holds two invariants git's rules imply: a
// pattern without wildcards or slashes matches exactly the paths whose
// last component equals it, and a "!" line never excludes anything when
// it is the only line.
func FuzzIgnoreFile(f *testing.F) {
	for _, s := range []string{
		"*.log\nbuild/\n!keep.log\n", "[!a]*\nx[^0-4].dat\n[[:digit:]]*\n", "/root\ndir/**/gen\n**/cache/\nx/**\n",
		"\\#hash\ntrail  \nesc\\ \n\\!bang\n", "\xef\xbb\xbf# bom\r\nfoo\r\n", "[[:bogus:]]\n[a-\n***\n\\\n",
	} {
		f.Add([]byte(s), "dir/sub/keep.log", false)
	}
	f.Add([]byte("a/**/b"), "a/x/y/b", true)
	f.Fuzz(func(t *testing.T, data []byte, path string, isDir bool) {
		if path == "" || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") || strings.IndexByte(path, 0) >= 0 {
			return
		}
		l := parseIgnoreFile(data, "")
		x := excluder{global: []ignoreList{l}}
		_ = x.excluded(nil, path, isDir)
		_ = x.excluded([]ignoreList{parseIgnoreFile(data, "dir/")}, path, isDir)
		for _, p := range l {
			if len(p.pattern) > 0 && simpleLength(p.pattern) == len(p.pattern) && p.flags&patNoDir != 0 && p.flags&patMustBeDir == 0 {
				base := path[strings.LastIndexByte(path, '/')+1:]
				if got := p.matches(path, isDir); got != (base == p.pattern) {
					t.Fatalf("literal pattern %q on %q: match = %v", p.pattern, path, got)
				}
			}
			if len(l) == 1 && p.flags&patNegative != 0 && x.excluded(nil, path, isDir) {
				t.Fatalf("a lone negative pattern %q excluded %q", p.pattern, path)
			}
		}
	})
}

// FuzzConfig checks that no configuration file makes the parser panic.
func FuzzConfig(f *testing.F) {
	for _, s := range []string{
		"[core]\n\tbare = false\n\tfilemode\n[filter \"lfs\"]\n\tclean = git-lfs clean -- %f\n",
		"[Section.Sub]\nkey = \"quoted \\\"value\\\"\" ; comment\nnext = a\\\n  b\n",
		"[include]\npath = ~/x\n[includeIf \"gitdir:~/work/\"]\npath = y\n",
		"Top = level\n[remote\t\"Origin\"]\r\n\turl = u\\",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		vars, err := parseConfig(data, "fuzz")
		if err != nil {
			var ue *UnsupportedError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v is not an UnsupportedError", err)
			}
			return
		}
		for _, v := range vars {
			// A key before any section header has no section: it is
			// lower-cased as a whole.
			section, _, _ := strings.Cut(v.key, ".")
			if v.key == "" || strings.ToLower(section) != section {
				t.Fatalf("key %q has an upper-case section", v.key)
			}
		}
	})
}
