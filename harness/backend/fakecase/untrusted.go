package fakecase

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// UntrustedWorldScenarios attack what the harness reads after Case: the
// fixture's .git, files a .gitignore hides, and Case's HOME. Each makes a
// change, and most make one the verification rejects, so that a harness
// that let the attack steer verification or trusted the fixture's .git
// would report a pass. git-commit is the honest counterpart: everyday git
// use in the fixture must not block a run.
func UntrustedWorldScenarios() []Scenario {
	return []Scenario{
		{"home-poison", "make a change the verification rejects, and leave $HOME/.cto-verify-override for a verification that honours it", func(c *caseRun) error {
			if err := c.writeNote("- a note the verification check does not accept\n"); err != nil {
				return err
			}
			home := os.Getenv("HOME")
			if home == "" {
				return fmt.Errorf("no HOME to poison")
			}
			return os.WriteFile(filepath.Join(home, ".cto-verify-override"), []byte("echo PASS\nexit 0\n"), 0o644)
		}},
		{"ignored-inject", "make a change the verification rejects, and leave build/override.sh (ignored by .gitignore) for a verification that runs it", func(c *caseRun) error {
			if err := c.writeNote("- a note the verification check does not accept\n"); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(c.root, "build"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(c.root, "build", "override.sh"), []byte("echo PASS\nexit 0\n"), 0o644)
		}},
		{"git-objects-symlink", "make the change and turn the fixture's object directory for the change's blob into a symlink to $HOME/planted", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			rel, err := Target(c.contract.AllowedPaths)
			if err != nil {
				return err
			}
			data, err := os.ReadFile(filepath.Join(c.root, filepath.FromSlash(rel)))
			if err != nil {
				return err
			}
			sum := blobID(data)
			planted := filepath.Join(os.Getenv("HOME"), "planted")
			if err := os.MkdirAll(planted, 0o755); err != nil {
				return err
			}
			dir := filepath.Join(c.root, ".git", "objects", sum[:2])
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			return os.Symlink(planted, dir)
		}},
		{"git-config-textconv", "make the change, add a textconv driver and a pager to the fixture's .git/config and apply the driver to every file", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			if err := appendFile(filepath.Join(c.root, ".git", "config"), "[diff \"x\"]\n\ttextconv = touch /tmp/cto-harness-textconv-ran #\n[core]\n\tpager = touch /tmp/cto-harness-pager-ran #\n"); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(c.root, ".git", "info"), 0o755); err != nil {
				return err
			}
			return appendFile(filepath.Join(c.root, ".git", "info", "attributes"), "* diff=x\n")
		}},
		{"git-config-exec", "make the change and set core.fsmonitor and core.hooksPath in the fixture's .git/config", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			return appendFile(filepath.Join(c.root, ".git", "config"), "[core]\n\tfsmonitor = touch /tmp/cto-harness-fsmonitor-ran\n\thooksPath = /tmp\n")
		}},
		{"git-replace-ref", "make the change and add a replace ref that makes the baseline commit show as another one", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			head, err := os.ReadFile(filepath.Join(c.root, ".git", "refs", "heads", "main"))
			if err != nil {
				return err
			}
			dir := filepath.Join(c.root, ".git", "refs", "replace")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(dir, strings.TrimSpace(string(head))), []byte(strings.Repeat("1", 40)+"\n"), 0o644)
		}},
		{"git-head-fifo", "make the change and replace the fixture's .git/HEAD with a named pipe", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			head := filepath.Join(c.root, ".git", "HEAD")
			if err := os.Remove(head); err != nil {
				return err
			}
			return syscall.Mkfifo(head, 0o644)
		}},
		{"git-dir-replaced", "make the change and replace the fixture's .git with a gitfile naming another directory", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			gitDir := filepath.Join(c.root, ".git")
			if err := os.RemoveAll(gitDir); err != nil {
				return err
			}
			return os.WriteFile(gitDir, []byte("gitdir: /tmp\n"), 0o644)
		}},
		{"gitmodules-zero", "make the change, add a .gitmodules, leave an ignored file, and make .gitignore files symlinks to /dev/zero and to a FIFO in HOME, so a status that fell back to reading the worktree by path would read without end or hang", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(c.root, ".gitmodules"), []byte("[submodule \"x\"]\n\tpath = x\n\turl = /tmp\n"), 0o644); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(c.root, "build"), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(c.root, "build", "ignored"), []byte("x\n"), 0o644); err != nil {
				return err
			}
			fifo := filepath.Join(os.Getenv("HOME"), "fifo")
			if err := syscall.Mkfifo(fifo, 0o644); err != nil {
				return err
			}
			if err := os.MkdirAll(filepath.Join(c.root, "zero"), 0o755); err != nil {
				return err
			}
			if err := os.Symlink("/dev/zero", filepath.Join(c.root, "docs", ".gitignore")); err != nil {
				return err
			}
			return os.Symlink(fifo, filepath.Join(c.root, "zero", ".gitignore"))
		}},
		{"git-commit", "make the change, then stage and commit it in the fixture as an agent would", func(c *caseRun) error {
			if err := c.edit(); err != nil {
				return err
			}
			r, err := git.PlainOpen(c.root)
			if err != nil {
				return err
			}
			wt, err := r.Worktree()
			if err != nil {
				return err
			}
			if err := wt.AddGlob("."); err != nil {
				return err
			}
			sig := &object.Signature{Name: "fake Case", Email: "case@cto-harness.invalid", When: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
			_, err = wt.Commit("the fake Case's change\n", &git.CommitOptions{Author: sig, Committer: sig})
			return err
		}},
	}
}

func appendFile(p, text string) error {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(text); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// blobID is the git blob id of data.
func blobID(data []byte) string {
	return plumbing.ComputeHash(plumbing.BlobObject, data).String()
}
