package validators

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cto-harness/cto-harness/harness/gitstatus"
)

// LeakMarker is the text plantLeaks writes into every object it adds: a
// Case that finds it anywhere in its fixture's .git found something of the
// source beyond the base's history.
const LeakMarker = "LEAK_MARKER_7f3a"

// plantLeaks gives the source at src, whose worktree stays clean, what a
// real repository holds beside its HEAD's history, each with LeakMarker in
// it: a branch with the future (an answer file, on top of HEAD), an
// annotated tag on it, a stash, a note, a commit only the HEAD reflog
// remembers, and an unreachable blob.
func plantLeaks(src string, when time.Time) error {
	r, err := git.PlainOpen(src)
	if err != nil {
		return err
	}
	head, err := r.Head()
	if err != nil {
		return err
	}
	hc, err := r.CommitObject(head.Hash())
	if err != nil {
		return err
	}
	sig := object.Signature{Name: "leaks", Email: "leaks@matrix.invalid", When: when}
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) (plumbing.Hash, error) {
		obj := r.Storer.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			return plumbing.ZeroHash, err
		}
		return r.Storer.SetEncodedObject(obj)
	}
	blob := func(text string) (plumbing.Hash, error) {
		obj := r.Storer.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write([]byte(text)); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		return r.Storer.SetEncodedObject(obj)
	}
	// withFile is HEAD's tree with one more file at the root.
	withFile := func(name, text string) (plumbing.Hash, error) {
		b, err := blob(text)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		t, err := hc.Tree()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries := append(slices.Clone(t.Entries), object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: b})
		slices.SortFunc(entries, func(a, b object.TreeEntry) int {
			return gitstatus.TreeOrder(a.Name, a.Mode == filemode.Dir, b.Name, b.Mode == filemode.Dir)
		})
		return put(&object.Tree{Entries: entries})
	}
	commit := func(file, msg string, parents ...plumbing.Hash) (plumbing.Hash, error) {
		t, err := withFile(file, msg+"\n")
		if err != nil {
			return plumbing.ZeroHash, err
		}
		return put(&object.Commit{Author: sig, Committer: sig, Message: msg + "\n", TreeHash: t, ParentHashes: parents})
	}
	ref := func(name plumbing.ReferenceName, h plumbing.Hash) error {
		return r.Storer.SetReference(plumbing.NewHashReference(name, h))
	}
	future, err := commit("THE_ANSWER.txt", "the answer "+LeakMarker+" future", hc.Hash)
	if err != nil {
		return err
	}
	if err := ref("refs/heads/answer", future); err != nil {
		return err
	}
	tag, err := put(&object.Tag{Name: "v9", Tagger: sig, Message: "tag " + LeakMarker + "\n", TargetType: plumbing.CommitObject, Target: future})
	if err != nil {
		return err
	}
	if err := ref("refs/tags/v9", tag); err != nil {
		return err
	}
	stash, err := commit("stashed.txt", "WIP on main: "+LeakMarker+" stash", hc.Hash)
	if err != nil {
		return err
	}
	if err := ref("refs/stash", stash); err != nil {
		return err
	}
	note, err := blob("note " + LeakMarker + "\n")
	if err != nil {
		return err
	}
	nt, err := put(&object.Tree{Entries: []object.TreeEntry{{Name: hc.Hash.String(), Mode: filemode.Regular, Hash: note}}})
	if err != nil {
		return err
	}
	notes, err := put(&object.Commit{Author: sig, Committer: sig, Message: "Notes added by 'git notes add'\n", TreeHash: nt})
	if err != nil {
		return err
	}
	if err := ref("refs/notes/commits", notes); err != nil {
		return err
	}
	gone, err := commit("gone.txt", "amended away "+LeakMarker+" reflog", hc.Hash)
	if err != nil {
		return err
	}
	logs := filepath.Join(src, ".git", "logs")
	if err := os.MkdirAll(filepath.Join(logs, "refs"), 0o755); err != nil {
		return err
	}
	line := fmt.Sprintf("%s %s leaks <leaks@matrix.invalid> %d +0000\tcommit (amend): gone\n%s %s leaks <leaks@matrix.invalid> %d +0000\treset: moving to HEAD~1\n",
		hc.Hash, gone, when.Unix(), gone, hc.Hash, when.Unix())
	f, err := os.OpenFile(filepath.Join(logs, "HEAD"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	_, err = blob("dangling " + LeakMarker + "\n")
	return err
}

// commitAnswer commits THE_ANSWER.txt, holding LeakMarker, on top of the
// source's main, through go-git's worktree, so the source stays clean.
func commitAnswer(src string, when time.Time) error {
	r, err := git.PlainOpen(src)
	if err != nil {
		return err
	}
	wt, err := r.Worktree()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "THE_ANSWER.txt"), []byte("the answer "+LeakMarker+"\n"), 0o644); err != nil {
		return err
	}
	if _, err := wt.Add("THE_ANSWER.txt"); err != nil {
		return err
	}
	sig := &object.Signature{Name: "leaks", Email: "leaks@matrix.invalid", When: when}
	_, err = wt.Commit("the answer "+LeakMarker+"\n", &git.CommitOptions{Author: sig, Committer: sig})
	return err
}
