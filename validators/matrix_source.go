package validators

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"golang.org/x/sys/unix"
	"golang.org/x/tools/txtar"

	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/gitstatus"
	"github.com/cto-harness/cto-harness/harness/source"
)

// materializeWith materializes the sample source with extra committed
// files, then rewrites those files in the worktree the way git's checkout
// writes them (the committed .gitattributes, core.autocrlf and core.eol of
// gitConfig), as a clone of such a repository would hold them.
func materializeWith(ctx context.Context, dst string, st fixtures.Setup, when time.Time) error {
	files, gitConfig := map[string]string{}, st.SourceGitConfig
	for k, v := range st.SourceFiles {
		files[k] = v
	}
	if len(st.SourceSubmodules) > 0 {
		files[".gitmodules"] = gitmodules(childSubmodules("", st.SourceSubmodules))
	}
	archive, err := fixtures.Archive(fixtures.SampleOwned)
	if err != nil {
		return err
	}
	a := txtar.Parse(archive)
	// A submodule takes the place of whatever the sample has at its path.
	for _, sub := range childSubmodules("", st.SourceSubmodules) {
		kept := a.Files[:0]
		for _, f := range a.Files {
			if f.Name != sub && !strings.HasPrefix(f.Name, sub+"/") {
				kept = append(kept, f)
			}
		}
		a.Files = kept
		var comment []string
		for _, line := range strings.Split(string(a.Comment), "\n") {
			if !strings.Contains(line, " "+sub+"/") {
				comment = append(comment, line)
			}
		}
		a.Comment = []byte(strings.Join(comment, "\n"))
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		a.Files = append(a.Files, txtar.File{Name: name, Data: []byte(files[name])})
	}
	if _, err := fixtures.Materialize(ctx, txtar.Format(a), dst, when.UTC().Truncate(time.Second)); err != nil {
		return err
	}
	if err := writeGitFiles(dst, st.SourceGitFiles); err != nil {
		return err
	}
	attrs := map[string][]byte{}
	for _, f := range a.Files {
		if f.Name == ".gitattributes" || strings.HasSuffix(f.Name, "/.gitattributes") {
			attrs[strings.TrimSuffix(f.Name, ".gitattributes")] = f.Data
		}
	}
	conv := gitstatus.NewConversions(attrs, nil, checkoutSettings(gitConfig))
	r, err := git.PlainOpen(dst)
	if err != nil {
		return err
	}
	if len(st.SourceSubmodules) > 0 {
		if err := addSubmodules(ctx, r, dst, st.SourceSubmodules, when); err != nil {
			return err
		}
	}
	idx, err := r.Storer.Index()
	if err != nil {
		return err
	}
	for _, name := range names {
		data := []byte(files[name])
		cv := conv.For(name)
		out := cv.ToWorktree(data, plumbing.ComputeHash(plumbing.BlobObject, data))
		if oid, _, ok := gitstatus.ParseLFSPointer(data); ok && cv.LFS {
			// git-lfs's smudge, when the object is in the local store.
			if content, err := os.ReadFile(filepath.Join(dst, ".git", "lfs", "objects", oid[:2], oid[2:4], oid)); err == nil {
				out = content
			}
		}
		if bytes.Equal(out, data) {
			continue
		}
		p := filepath.Join(dst, filepath.FromSlash(name))
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return fmt.Errorf("write %s as git checks it out: %w", name, err)
		}
		// Git's checkout records the stat data of what it wrote.
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		e, err := idx.Entry(name)
		if err != nil {
			return fmt.Errorf("index entry of %s: %w", name, err)
		}
		e.Size = uint32(st.Size)
		e.ModifiedAt = time.Unix(st.Mtim.Unix())
		e.CreatedAt = time.Unix(st.Ctim.Unix())
		e.Inode, e.Dev = uint32(st.Ino), uint32(st.Dev)
	}
	return r.Storer.SetIndex(idx)
}

// checkoutSettings picks core.autocrlf and core.eol out of a [core]
// section of a matrix row's git config text.
func checkoutSettings(cfg string) gitstatus.CheckoutSettings {
	var s gitstatus.CheckoutSettings
	for _, line := range strings.Split(cfg, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if !ok {
			continue
		}
		switch strings.ToLower(strings.TrimSpace(k)) {
		case "autocrlf":
			s.AutoCRLF = strings.TrimSpace(v)
		case "eol":
			s.EOL = strings.TrimSpace(v)
		case "smudge", "process":
			s.LFS = s.LFS || strings.HasPrefix(strings.TrimSpace(v), "git-lfs ")
		}
	}
	return s
}

// writeGitFiles writes a row's files below the source's .git.
func writeGitFiles(src string, files map[string]string) error {
	for name, data := range files {
		p := filepath.Join(src, ".git", filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// addSubmodules makes each submodule a repository of its own inside dst
// (its .git embedded) and commits it into dst as a gitlink, as `git
// submodule add` of a local repository would. A path below another
// submodule's is a submodule of that one (nested), committed into it the
// same way before it is committed into dst.
func addSubmodules(ctx context.Context, r *git.Repository, dst string, subs map[string]map[string]string, when time.Time) error {
	return commitGitlinks(ctx, r, dst, "", subs, when, "submodules\n")
}

// commitGitlinks makes the submodules directly below the submodule at
// prefix ("" for the superproject, whose repository r is at dir) and
// commits them into r as gitlinks.
func commitGitlinks(ctx context.Context, r *git.Repository, dir, prefix string, subs map[string]map[string]string, when time.Time, msg string) error {
	idx, err := r.Storer.Index()
	if err != nil {
		return err
	}
	for _, p := range childSubmodules(prefix, subs) {
		rel := strings.TrimPrefix(p, prefix)
		head, err := makeSubmodule(ctx, filepath.Join(dir, filepath.FromSlash(rel)), p, subs, when)
		if err != nil {
			return fmt.Errorf("submodule %s: %w", p, err)
		}
		idx.Entries = append(idx.Entries, &index.Entry{Name: rel, Mode: filemode.Submodule, Hash: plumbing.NewHash(head)})
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	if err := r.Storer.SetIndex(idx); err != nil {
		return err
	}
	w, err := r.Worktree()
	if err != nil {
		return err
	}
	sig := object.Signature{Name: fixtures.AuthorName, Email: fixtures.AuthorEmail, When: when.UTC().Truncate(time.Second)}
	_, err = w.Commit(msg, &git.CommitOptions{Author: &sig, Committer: &sig})
	return err
}

// makeSubmodule makes the repository of submodule p at dir, with its files
// and, when it has submodules of its own, their .gitmodules and gitlinks;
// it returns its HEAD commit.
func makeSubmodule(ctx context.Context, dir, p string, subs map[string]map[string]string, when time.Time) (string, error) {
	var a txtar.Archive
	files := map[string]string{}
	for name, data := range subs[p] {
		files[name] = data
	}
	inner := childSubmodules(p+"/", subs)
	if len(inner) > 0 {
		files[".gitmodules"] = gitmodules(trimAll(inner, p+"/"))
	}
	for _, name := range sortedKeys(files) {
		a.Files = append(a.Files, txtar.File{Name: name, Data: []byte(files[name])})
	}
	head, err := fixtures.Materialize(ctx, txtar.Format(&a), dir, when.UTC().Truncate(time.Second))
	if err != nil || len(inner) == 0 {
		return head, err
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		return "", err
	}
	if err := commitGitlinks(ctx, r, dir, p+"/", subs, when, "nested submodules\n"); err != nil {
		return "", err
	}
	ref, err := r.Head()
	if err != nil {
		return "", err
	}
	return ref.Hash().String(), nil
}

// childSubmodules are the submodule paths of subs directly below prefix
// ("" or "path/"): below it, and below no other submodule there.
func childSubmodules(prefix string, subs map[string]map[string]string) []string {
	var out []string
	for _, p := range sortedKeys(subs) {
		if !strings.HasPrefix(p, prefix) || p == strings.TrimSuffix(prefix, "/") {
			continue
		}
		nested := false
		for q := range subs {
			if strings.HasPrefix(q, prefix) && q != p && strings.HasPrefix(p, q+"/") {
				nested = true
			}
		}
		if !nested {
			out = append(out, p)
		}
	}
	return out
}

// gitmodules is a .gitmodules naming each path.
func gitmodules(paths []string) string {
	var mods strings.Builder
	for _, p := range paths {
		fmt.Fprintf(&mods, "[submodule %q]\n\tpath = %s\n\turl = https://example.invalid/%s.git\n", p, p, p)
	}
	return mods.String()
}

func trimAll(paths []string, prefix string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = strings.TrimPrefix(p, prefix)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// separateGitDir moves src's git directory to gitDir and leaves the gitfile
// naming it, the layout git init --separate-git-dir makes. It returns the
// git directory's real path.
func separateGitDir(src, gitDir string) (string, error) {
	if err := os.MkdirAll(filepath.Dir(gitDir), 0o755); err != nil {
		return "", err
	}
	if err := os.Rename(filepath.Join(src, ".git"), gitDir); err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(gitDir)
	if err != nil {
		return "", err
	}
	return real, os.WriteFile(filepath.Join(src, ".git"), []byte("gitdir: "+real+"\n"), 0o644)
}

// rowRepo is the source at src as the row's own proofs see it: its git
// directory is src/.git, or the one a gitfile there names.
func rowRepo(src string) source.Repo {
	return source.Repo{Given: src, Root: src, GitDir: gitstatus.GitDirOf(src)}
}
