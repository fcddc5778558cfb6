package dataset

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// startStates is the repository the import writes for tasks whose
// starting state is not a repository of their own: on its main branch a
// README only, and one root commit per task, kept by refs/tasks/<task>.
// Commits are made with a fixed author and time, so the same files give
// the same base on every import.
type startStates struct {
	dir  string
	repo *git.Repository
}

// readme marks the repository as the import's own.
const readme = "This repository holds the starting states of imported tasks: one root commit per task,\n" +
	"named by refs/tasks/<task>, each the files the task's environment copies into its workdir.\n" +
	"Written by cto-harness task import; list it as an owned source to run the tasks.\n"

var importSig = object.Signature{Name: "cto-harness import", Email: "import@cto-harness.invalid", When: time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)}

// openStartStates opens the import's repository at dir, or makes it.
func openStartStates(dir string) (*startStates, error) {
	if _, err := os.Stat(dir); err == nil {
		r, err := git.PlainOpen(dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %s exists and is not a repository the import wrote: %v; give another --out", ErrInput, dir, err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "README"))
		if err != nil || string(data) != readme {
			return nil, fmt.Errorf("%w: %s is a repository the import did not write (no README of its own); give another --out", ErrInput, dir)
		}
		return &startStates{dir: dir, repo: r}, nil
	}
	r, err := git.PlainInit(dir, false)
	if err != nil {
		return nil, fmt.Errorf("make the starting states' repository %s: %w", dir, err)
	}
	s := &startStates{dir: dir, repo: r}
	h, err := s.commit(map[string]entry{"README": {data: []byte(readme)}}, "The starting states of imported tasks\n")
	if err != nil {
		return nil, err
	}
	main := plumbing.NewBranchReferenceName("main")
	if err := r.Storer.SetReference(plumbing.NewHashReference(main, h)); err != nil {
		return nil, err
	}
	if err := r.Storer.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, main)); err != nil {
		return nil, err
	}
	return s, nil
}

// add commits files as task id's starting state and names it
// refs/tasks/<id>; it returns the commit.
func (s *startStates) add(id string, files map[string]entry) (string, error) {
	if len(files) == 0 {
		files = map[string]entry{".gitkeep": {}} // a commit needs a tree; an empty workdir holds one empty file
	}
	h, err := s.commit(files, "Starting state of "+id+"\n")
	if err != nil {
		return "", fmt.Errorf("commit the starting state: %w", err)
	}
	ref := plumbing.ReferenceName("refs/tasks/" + id)
	if err := s.repo.Storer.SetReference(plumbing.NewHashReference(ref, h)); err != nil {
		return "", err
	}
	return h.String(), nil
}

// finish checks out main, so the repository's worktree is clean as an
// owned source must be.
func (s *startStates) finish() error {
	wt, err := s.repo.Worktree()
	if err != nil {
		return err
	}
	head, err := s.repo.Head()
	if err != nil {
		return err
	}
	if err := wt.Reset(&git.ResetOptions{Mode: git.HardReset, Commit: head.Hash()}); err != nil {
		return fmt.Errorf("check out the starting states' repository %s: %w", s.dir, err)
	}
	return nil
}

// commit writes files as a root commit's tree.
func (s *startStates) commit(files map[string]entry, msg string) (plumbing.Hash, error) {
	tree, err := s.tree("", files)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	c := &object.Commit{Author: importSig, Committer: importSig, Message: msg, TreeHash: tree}
	return s.store(c)
}

// tree writes the tree of the files below dir ("" is the root).
func (s *startStates) tree(dir string, files map[string]entry) (plumbing.Hash, error) {
	subdirs := map[string]bool{}
	t := &object.Tree{}
	for p, f := range files {
		rel := p
		if dir != "" {
			if !strings.HasPrefix(p, dir+"/") {
				continue
			}
			rel = p[len(dir)+1:]
		}
		if name, _, nested := strings.Cut(rel, "/"); nested {
			subdirs[name] = true
			continue
		}
		blob := s.repo.Storer.NewEncodedObject()
		blob.SetType(plumbing.BlobObject)
		w, err := blob.Writer()
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if _, err := w.Write(f.data); err != nil {
			return plumbing.ZeroHash, err
		}
		if err := w.Close(); err != nil {
			return plumbing.ZeroHash, err
		}
		h, err := s.repo.Storer.SetEncodedObject(blob)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if f.exec {
			mode = filemode.Executable
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: rel, Mode: mode, Hash: h})
	}
	for name := range subdirs {
		h, err := s.tree(path.Join(dir, name), files)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	// git orders a tree's entries by name, a directory's as if it ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(t.Entries, func(i, j int) bool { return key(t.Entries[i]) < key(t.Entries[j]) })
	return s.store(t)
}

type encoder interface {
	Encode(plumbing.EncodedObject) error
}

func (s *startStates) store(o encoder) (plumbing.Hash, error) {
	obj := s.repo.Storer.NewEncodedObject()
	if err := o.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	h, err := s.repo.Storer.SetEncodedObject(obj)
	if err != nil {
		return plumbing.ZeroHash, errors.Join(errors.New("write to the starting states' repository"), err)
	}
	return h, nil
}
