package source

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	ctoharness "github.com/cto-harness/cto-harness"
)

// busyLocks are the lock files git holds while it writes a repository's
// shared state; any of them present means a git command is running (or
// crashed and left it, which git itself refuses to work past too).
var busyLocks = []string{
	"index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock", "shallow.lock",
	"gc.pid.lock", "gc.log.lock",
	"objects/maintenance.lock", "objects/info/commit-graph.lock", "objects/info/commit-graphs/commit-graph-chain.lock",
	"objects/pack/multi-pack-index.lock", "objects/info/packs.lock",
}

// gcStale is how old a gc.pid must be for git to take over from it.
const gcStale = 12 * time.Hour

// checkBusy refuses a source a git process is working in: a background
// `git gc --auto` or `git maintenance run` started by the last commit
// repacks and prunes while the run proves the source, so the after-proof
// would call the run SOURCE_MUTATED once Case had already worked. Refusing
// up front costs the user a few seconds of waiting instead.
func checkBusy(in *inspector, gitDir string, now time.Time) error {
	for _, l := range busyLocks {
		p := gitDir + "/" + l
		if _, err := in.lstat(p); err == nil {
			return block(ctoharness.BlockSourceBusy, nil,
				"%s exists: a git command is working in the source (gc, maintenance, a commit or a fetch); wait until it ends and run again, or remove the file if no git process is running", p)
		} else if !isNotExist(err) {
			return classifyFSError(p, err)
		}
	}
	for _, dir := range []string{gitDir, gitDir + "/objects", gitDir + "/objects/info", gitDir + "/objects/pack"} {
		p, err := lockIn(in, dir)
		if err != nil {
			return err
		}
		if p != "" {
			return block(ctoharness.BlockSourceBusy, nil,
				"%s exists: a git command is working in the source; wait until it ends and run again, or remove the file if no git process is running", p)
		}
	}
	if p, err := refLock(in, gitDir+"/refs"); err != nil {
		return err
	} else if p != "" {
		return block(ctoharness.BlockSourceBusy, nil,
			"%s exists: a git command is updating that ref; wait until it ends and run again, or remove the file if no git process is running", p)
	}
	pidFile := gitDir + "/gc.pid"
	fi, err := in.lstat(pidFile)
	if err != nil {
		if isNotExist(err) {
			return nil
		}
		return classifyFSError(pidFile, err)
	}
	data, err := in.readFile(pidFile)
	if err != nil && !isNotExist(err) {
		return classifyFSError(pidFile, err)
	}
	if gcRunning(string(data), fi.ModTime(), now) {
		return block(ctoharness.BlockSourceBusy, nil,
			"%s names a running git gc (%s): it repacks and prunes the source's objects; wait until it ends (git gc leaves when done) and run again", pidFile, strings.TrimSpace(string(data)))
	}
	return nil
}

// gcRunning applies git's own rule for a gc.pid ("PID HOST"): a gc is
// running unless the file is older than twelve hours or names a process of
// this host that no longer exists.
func gcRunning(content string, mtime, now time.Time) bool {
	if now.Sub(mtime) > gcStale {
		return false
	}
	fields := strings.Fields(content)
	if len(fields) < 2 {
		return true // unreadable: git assumes a gc is running too
	}
	pid, err := strconv.Atoi(fields[0])
	host, _ := os.Hostname()
	if err != nil || pid <= 0 || fields[1] != host {
		return true
	}
	return !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// refLock finds a *.lock file below refs (a ref being updated).
func refLock(in *inspector, refs string) (string, error) {
	if err := in.guard(refs); err != nil {
		return "", err
	}
	in.tr.Trace(ctoharness.TraceWalk, refs)
	found := ""
	err := filepath.WalkDir(refs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if isNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".lock") {
			found = p
			return filepath.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", classifyFSError(refs, err)
	}
	return found, nil
}

// lockIn finds a *.lock file directly in dir ("" when none, or no dir).
func lockIn(in *inspector, dir string) (string, error) {
	if err := in.guard(dir); err != nil {
		return "", err
	}
	in.tr.Trace(ctoharness.TraceRead, dir)
	names, err := os.ReadDir(dir)
	if isNotExist(err) {
		return "", nil
	}
	if err != nil {
		return "", classifyFSError(dir, err)
	}
	for _, d := range names {
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".lock") {
			return dir + "/" + d.Name(), nil
		}
	}
	return "", nil
}
