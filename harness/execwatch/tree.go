package execwatch

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// kind is what an exec is, or what a process has become.
type kind int

const (
	kindCommand kind = iota // a new command: counted against the budget
	kindInside              // part of a command: its descendants, its re-execs
	kindAgent               // the agent itself
)

// maxDepth bounds the walk up the process tree from one caller.
const maxDepth = 64

// maxTracked bounds the processes remembered; past it the dead are pruned.
const maxTracked = 1 << 16

// key names a process for as long as it lives: a pid with its start time,
// so a reused pid is a different process.
type key struct {
	pid   int
	start uint64
}

// tree remembers the processes seen exec, and what each became.
//
// The rules, decided at each exec from the calling process and its
// ancestors (PPid and start time read from /proc at that moment):
//
//   - the first exec by a child of the launcher is Case's root: the agent;
//   - a process already known keeps what it is: the agent re-executing
//     itself stays the agent, a command re-executing (a shell's exec
//     builtin, `sh -c` running its last word in place) stays inside;
//   - otherwise the nearest known ancestor decides: below a command, the
//     exec is inside that command; below the agent, it is a new command,
//     unless it executes one of the agent's own executables (an
//     AgentPaths entry) or the agent parent's own executable (an agent
//     relaunching itself), which stay the agent;
//   - an exec with no known ancestor (an orphan of a command, reparented
//     to the launcher) is a new command: what cannot be traced is counted.
type tree struct {
	mu       sync.Mutex
	launcher int
	agent    []string
	root     bool
	procs    map[key]kind
}

func newTree(launcher int, agentPaths []string) *tree {
	var clean []string
	for _, p := range agentPaths {
		if filepath.IsAbs(p) {
			clean = append(clean, filepath.Clean(p))
		}
	}
	return &tree{launcher: launcher, agent: clean, procs: map[key]kind{}}
}

// classify decides one exec; it returns the caller's key, to be set to
// what it becomes once the exec is let through.
func (t *tree) classify(c call) (key, kind) {
	tgid, err := threadGroup(c.tid)
	if err != nil {
		return key{pid: c.tid}, kindCommand
	}
	ppid, start, err := stat(tgid)
	if err != nil {
		return key{pid: tgid}, kindCommand
	}
	self := key{tgid, start}
	t.mu.Lock()
	defer t.mu.Unlock()
	if k, ok := t.procs[self]; ok {
		return self, k
	}
	parent := ppid
	for depth := 0; depth < maxDepth && parent > 1 && parent != t.launcher; depth++ {
		pp, pstart, err := stat(parent)
		if err != nil {
			break
		}
		if k, ok := t.procs[key{parent, pstart}]; ok {
			if k == kindInside {
				return self, kindInside
			}
			if t.agentExec(c.path, parent) {
				return self, kindAgent
			}
			return self, kindCommand
		}
		parent = pp
	}
	if parent == t.launcher && ppid == t.launcher && !t.root {
		t.root = true
		return self, kindAgent
	}
	return self, kindCommand
}

// agentExec reports whether file is one of the agent's own executables, or
// the executable of its agent parent.
func (t *tree) agentExec(file string, parent int) bool {
	if !filepath.IsAbs(file) {
		return false
	}
	file = filepath.Clean(file)
	for _, a := range t.agent {
		if file == a || strings.HasPrefix(file, a+"/") {
			return true
		}
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", parent))
	return err == nil && exe == file
}

// set records what a process became.
func (t *tree) set(k key, v kind) {
	if k.start == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.procs) >= maxTracked {
		for p := range t.procs {
			if _, start, err := stat(p.pid); err != nil || start != p.start {
				delete(t.procs, p)
			}
		}
		if len(t.procs) >= maxTracked {
			return // every one alive: the newest is traced through its parent
		}
	}
	t.procs[k] = v
}

// stat reads a process's parent and start time from /proc/PID/stat.
func stat(pid int) (ppid int, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) may hold anything: read after its last ')'.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state): ppid is field 4, starttime field 22.
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ppid, err = strconv.Atoi(f[1])
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: ppid: %w", pid, err)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return ppid, start, nil
}

// threadGroup is the process the thread tid belongs to.
func threadGroup(tid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Tgid:"); ok {
			return strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no Tgid", tid)
}
