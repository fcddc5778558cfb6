package fakecase

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/harness/task"
	"golang.org/x/sys/unix"
)

// Adversarial scenarios try something a confined Case must not be able to do.
// Each one first makes the normal canned change, then makes its attempt,
// observes what the kernel answered and records it as a case.log event
//
//	{"type":"case.log","attempt":"...","denied":true,"error":"...","errno":"EACCES",...}
//
// and then finishes normally, so the run reaches its end and the evidence
// shows both what was tried and what the harness made of it.

// floodBytes is what flood-stdout writes.
const floodBytes = 1 << 30

// forkBombCap bounds fork-bomb even where nothing else does.
const forkBombCap = 5000

// AdversarialScenarios lists the adversarial scenarios. The parameterised
// ones (Name ending in "=") are run as NAME=PARAM through LookupAdversarial.
func AdversarialScenarios() []Scenario {
	s := []Scenario{
		{"dotdot-escape", "write ../../escape.txt and ../report.json relative to the fixture", dotdotEscape},
		{"overwrite-evidence", "append to ../report.json, ../events.normalized.jsonl and the task file, and truncate the task file", overwriteEvidence},
		{"fork-bomb", fmt.Sprintf("fork until the kernel refuses (at most %d processes), then clean up", forkBombCap), forkBomb},
		{"flood-stdout", "write 1 GiB of non-event lines to stdout", floodStdout},
		{"vsock", "listen on a vsock port and connect to the host's CID", vsockReach},
		{"socket-families", "open a packet, raw inet, crypto (AF_ALG), audit and uevent netlink and a UNIX stream socket", socketFamilies},
	}
	for _, name := range sortedParamNames() {
		p := adversarialParam[name]
		s = append(s, Scenario{Name: name + "=", Description: p.description, run: func(*caseRun) error {
			return fmt.Errorf("scenario %s needs a parameter: %s=%s", name, name, p.param)
		}})
	}
	return s
}

var adversarialParam = map[string]struct {
	param, description string
	run                func(param string) func(*caseRun) error
}{
	"write-source-abs": {"PATH", "write a file at the absolute PATH (inside the source)", writeSourceAbs},
	"symlink-escape":   {"PATH", "plant a symlink in the fixture pointing at PATH (a source directory) and write through it", symlinkEscape},
	"connect":          {"HOST:PORT", "open a TCP connection to HOST:PORT", connectTCP},
	"daemon":           {"PATH", "leave a detached (setsid, double-forked) process appending to PATH after Case exits", daemon},
	"read-secret":      {"VAR", "look for the harness's environment variable VAR, in Case's environment and in /proc/*/environ", readSecret},
	"net-probes":       {"SPEC", "run network probes: \"KIND TARGET\" pairs separated by \";\" (get, proxyget, connect, tls HOST:PORT@SNI, dns, conns N@HOST:PORT)", netProbes},
	"chmod-source":     {"PATH", "chmod PATH (a source file) to 0777", chmodPath},
	"touch-source":     {"PATH", "set PATH's (a source file's) access and modification times", touchPath},
	"setxattr-source":  {"PATH", "set a user.* extended attribute on PATH (a source file)", setxattrPath},
	"chown-source":     {"PATH", "chown PATH (a source file) to nobody", chownPath},
	"read-leak":        {"PATH", "read PATH and copy what it read into the fixture", readLeak},
	"write-file":       {"REL", "write REL (a path in the fixture) with \"exit 0\" and make no other change", writeFile},
	"plant-tap":        {"REL", "make the canned change and write REL, a TAP report of one passing test, into the fixture", plantTAP},
	"apply-patch":      {"PATH", "apply the patch at PATH (a task's reference, shown in the view) with git apply, as the Case of a task check", applyPatch},
	"run-script":       {"PATH", "run the script at PATH (a task's reference solver, shown in the view) in the fixture with its #! interpreter, as the Case of a task check", runScript},
	"search-git":       {"NEEDLE", "make the canned change and look for NEEDLE in every object, ref, log and file of the fixture's .git (git log --all, cat-file --batch-all-objects, the packs inflated) and copy where it was found into the fixture", searchGit},
	"list-dir":         {"DIR", "list DIR and copy the names into the fixture", listDir},
	"keyring":          {"DESC", "read every key of the user keyring into the fixture (DESC names the host's) and plant a key there", keyringReach},
	"write-fd":         {"N", "write to descriptor N, one the harness inherited", writeFD},
	"unix-dgram":       {"PATH", "send a datagram to the host socket PATH from a UNIX socket and from a datagram socketpair", unixDgramReach},
	"poison-go-cache":  {"FILE", "overwrite every entry of $GOCACHE and add FILE, a Go test that does the same to the verification's build cache", poisonGoCache},
	"proc-args":        {"NEEDLES", "look for the ;-separated NEEDLES (hidden paths) in every /proc/*/cmdline, environ and mountinfo, plain and base64-decoded", procArgs},
	"write-snapshot":   {"DIR", "write into DIR (the runs directory's snapshots), and into the tree of every snapshot listed there", writeSnapshot},
	"write-objects":    {"DIR", "append to every object file of the fixture's .git (made writable first), and write into DIR (the runs directory's closures, or one closure), its objects and its layer, and those of every closure listed there", writeObjects},
	"await-copy":       {"PATH", "wait (at most a minute) until PATH exists, then copy what the fixture's README.md holds into the note", awaitCopy},
}

func sortedParamNames() []string {
	names := make([]string, 0, len(adversarialParam))
	for n := range adversarialParam {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// LookupAdversarial finds an adversarial scenario by name, or NAME=PARAM for
// the parameterised ones.
func LookupAdversarial(name string) (Scenario, bool) {
	if n, param, ok := strings.Cut(name, "="); ok {
		p, known := adversarialParam[n]
		if !known || param == "" {
			return Scenario{}, false
		}
		return Scenario{Name: n, Description: p.description, run: p.run(param)}, true
	}
	for _, s := range AdversarialScenarios() {
		if s.Name == name && !strings.HasSuffix(s.Name, "=") {
			return s, true
		}
	}
	return Scenario{}, false
}

// runScenario is Main after the lookup.
func runScenario(sc Scenario, stdout, stderr io.Writer, getenv func(string) string) int {
	taskFile := getenv("CASE_TASK_FILE")
	data, err := os.ReadFile(taskFile)
	if err != nil {
		fmt.Fprintf(stderr, "fake case: cannot read the task contract from CASE_TASK_FILE=%q: %v\n", taskFile, err)
		return 2
	}
	var contract task.Contract
	if err := json.Unmarshal(data, &contract); err != nil {
		fmt.Fprintf(stderr, "fake case: task contract %s is malformed: %v\n", taskFile, err)
		return 2
	}
	root, err := os.Getwd()
	if err != nil {
		fmt.Fprintln(stderr, "fake case:", err)
		return 2
	}
	c := &caseRun{root: root, contract: contract, out: json.NewEncoder(stdout), stdout: stdout}
	if !emitsOwnStart(sc.Name) {
		c.emit(ctoharness.EvCaseStarted, map[string]any{"scenario": sc.Name, "run_id": contract.RunID})
	}
	fmt.Fprintf(stderr, "fake case: scenario %s in %s\n", sc.Name, root)
	if err := sc.run(c); err != nil {
		c.emit(ctoharness.EvCaseLog, map[string]any{"message": err.Error()})
		fmt.Fprintln(stderr, "fake case:", err)
		return 1
	}
	if p := contract.ClaimsFile; p != "" {
		// A task with an adversary asks for claims: the fake Case claims
		// its canned change.
		target, _ := Target(contract.AllowedPaths)
		claims, _ := json.Marshal(ctoharness.Claims{Claims: []ctoharness.Claim{{Claim: "a note added by the fake Case is in " + target, Paths: []string{target}}}})
		if err := os.WriteFile(p, claims, 0o644); err != nil {
			fmt.Fprintln(stderr, "fake case: write the claims:", err)
		}
	}
	if !c.skipFinished {
		c.emit(ctoharness.EvCaseFinished, map[string]any{"status": map[bool]string{true: "ok", false: "failed"}[c.exitCode == 0]})
	}
	return c.exitCode
}

// attempt records one forbidden attempt and how it ended.
func (c *caseRun) attempt(what, target string, err error, extra map[string]any) {
	f := map[string]any{"attempt": what, "denied": err != nil}
	if target != "" {
		f["target"] = target
	}
	if err != nil {
		f["error"] = err.Error()
		var e syscall.Errno
		if errors.As(err, &e) {
			f["errno"] = unix.ErrnoName(e)
		}
		f["message"] = fmt.Sprintf("%s %s: denied (%v)", what, target, err)
	} else {
		f["message"] = fmt.Sprintf("%s %s: NOT denied", what, target)
	}
	for k, v := range extra {
		f[k] = v
	}
	c.emit(ctoharness.EvCaseLog, f)
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = io.WriteString(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeSourceAbs(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		c.attempt("write-source-abs", path, os.WriteFile(path, []byte("written by the fake Case\n"), 0o644), nil)
		return nil
	}
}

func symlinkEscape(dir string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		link := filepath.Join(c.root, "escape-link")
		if err := os.Symlink(dir, link); err != nil {
			c.attempt("symlink-create", link, err, nil)
			return nil
		}
		defer os.Remove(link) // the link itself is not the point; keep the fixture clean
		through := filepath.Join(link, "escaped-through-symlink.txt")
		c.attempt("symlink-escape", through, appendLine(through, "written through a symlink by the fake Case\n"),
			map[string]any{"resolves_to": filepath.Join(dir, "escaped-through-symlink.txt")})
		return nil
	}
}

func dotdotEscape(c *caseRun) error {
	if err := c.edit(); err != nil {
		return err
	}
	// Relative to the working directory (the fixture), resolved by the kernel.
	for _, rel := range []string{"../../escape.txt", "../report.json"} {
		c.attempt("dotdot-escape", rel, appendLine(rel, "written by the fake Case via ..\n"), nil)
	}
	return nil
}

func overwriteEvidence(c *caseRun) error {
	if err := c.edit(); err != nil {
		return err
	}
	run := filepath.Dir(c.root)
	targets := []string{filepath.Join(run, "report.json"), filepath.Join(run, "events.normalized.jsonl")}
	taskFile := os.Getenv("CASE_TASK_FILE")
	if taskFile != "" {
		targets = append(targets, taskFile)
	}
	for _, p := range targets {
		c.attempt("overwrite-evidence", p, appendLine(p, `{"tampered_by":"the fake Case"}`+"\n"), nil)
	}
	if taskFile != "" {
		c.attempt("truncate-evidence", taskFile, os.Truncate(taskFile, 0), nil)
	}
	return nil
}

func connectTCP(addr string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		conn, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err == nil {
			conn.Close()
		}
		c.attempt("connect", addr, err, nil)
		return nil
	}
}

// daemonScript detaches twice (a subshell that exits, then setsid) and
// appends to $1 forever, with no inherited stdio holding the harness's pipes.
const daemonScript = `(setsid sh -c 'while :; do date >> "$1"; sleep 0.1; done' sh "$1" </dev/null >/dev/null 2>&1 &)`

func daemon(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		err := exec.Command("/bin/sh", "-c", daemonScript, "sh", path).Run()
		started := false
		for i := 0; err == nil && i < 40 && !started; i++ {
			if _, serr := os.Stat(path); serr == nil {
				started = true
			} else {
				time.Sleep(50 * time.Millisecond)
			}
		}
		// Starting a daemon is not refused; what matters is that it does not
		// outlive Case. "denied" here means it could not even start.
		c.attempt("daemon", path, err, map[string]any{"started": started})
		return nil
	}
}

func forkBomb(c *caseRun) error {
	if err := c.edit(); err != nil {
		return err
	}
	errLog, err := os.CreateTemp("", "fork-bomb-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(errLog.Name())
	defer errLog.Close()
	script := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do sleep 60 & i=$((i+1)); done; echo "started $i sleepers" >&2`, forkBombCap)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Stdout, cmd.Stderr = errLog, errLog
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	runErr := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // the sleepers share the shell's group
	}
	out, _ := os.ReadFile(errLog.Name())
	capped := strings.Contains(string(out), fmt.Sprintf("started %d sleepers", forkBombCap))
	var denial error
	if !capped {
		denial = fmt.Errorf("the shell could not fork: %v: %s", runErr, strings.TrimSpace(lastLine(string(out))))
	}
	c.attempt("fork-bomb", "", denial, map[string]any{"duration_ms": time.Since(start).Milliseconds()})
	return nil
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

func floodStdout(c *caseRun) error {
	if err := c.edit(); err != nil {
		return err
	}
	line := strings.Repeat("flood ", 16*1024/6) + "\n"
	chunk := []byte(strings.Repeat(line, (1<<20)/len(line)+1)[:1<<20])
	var written int64
	var err error
	start := time.Now()
	for written < floodBytes && err == nil {
		var n int
		n, err = os.Stdout.Write(chunk)
		written += int64(n)
	}
	if _, werr := os.Stdout.Write([]byte("\n")); err == nil {
		err = werr
	}
	// Nothing is refused here: the harness caps what it keeps. The blocker
	// to expect is CASE_EVENT_MALFORMED.
	c.attempt("flood-stdout", "stdout", err, map[string]any{"bytes": written, "duration_ms": time.Since(start).Milliseconds()})
	return nil
}

func readSecret(name string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		_, inEnv := os.LookupEnv(name)
		var inProc []string
		var procErrs int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if e.Name()[0] < '0' || e.Name()[0] > '9' {
				continue
			}
			data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
			if err != nil {
				procErrs++
				continue
			}
			for _, kv := range strings.Split(string(data), "\x00") {
				if strings.HasPrefix(kv, name+"=") {
					inProc = append(inProc, e.Name())
				}
			}
		}
		var err error
		if !inEnv && len(inProc) == 0 {
			err = fmt.Errorf("%s is in neither Case's environment nor any readable /proc/*/environ", name)
		}
		// Only where it was seen is recorded, never the value.
		c.attempt("read-secret", name, err, map[string]any{"in_env": inEnv, "in_proc_environ": inProc, "proc_environ_unreadable": procErrs})
		return nil
	}
}

// writeSnapshot tries to change the snapshots a sandboxed Case's fixture is
// an overlay of: a new file in their directory, and each listed snapshot's
// README.md. Every attempt must be denied (the runs directory is outside
// the view, and overlayfs never writes a lower layer).
func writeSnapshot(dir string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		p := filepath.Join(dir, "written-by-case.txt")
		c.attempt("write-snapshot", p, os.WriteFile(p, []byte("written by the fake Case\n"), 0o644), nil)
		ents, err := os.ReadDir(dir)
		c.attempt("list-snapshots", dir, err, map[string]any{"entries": len(ents)})
		for _, e := range ents {
			t := filepath.Join(dir, e.Name(), "tree", "README.md")
			c.attempt("write-snapshot", t, appendLine(t, "written into the snapshot by the fake Case\n"), nil)
		}
		return nil
	}
}

// writeObjects tries to change the objects the fixture's .git shares with
// other runs. Its own object files are made writable and appended to: the
// overlay copies each up, so the run's copy changes and the shared closure
// it shows does not. DIR (the runs directory's closures, or one of them),
// its objects and its layer, and those of each closure listed there, are
// written too: every attempt there must be denied (the runs directory is
// outside the view).
func writeObjects(dir string) func(*caseRun) error {
	return func(c *caseRun) error {
		if err := c.edit(); err != nil {
			return err
		}
		// Its own objects are Case's to change: counted, not attempts.
		n, failed := 0, 0
		objects := filepath.Join(c.root, ".git", "objects")
		_ = filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() || n >= 20 {
				return nil
			}
			n++
			err = os.Chmod(p, 0o644)
			if err == nil {
				err = appendLine(p, "written into a shared object by the fake Case\n")
			}
			if err != nil {
				failed++
			}
			return nil
		})
		ents, err := os.ReadDir(dir)
		c.attempt("list-closures", dir, err, map[string]any{"entries": len(ents), "own_objects_rewritten": n - failed, "own_objects_failed": failed})
		dirs := []string{dir}
		for _, e := range ents {
			dirs = append(dirs, filepath.Join(dir, e.Name()))
		}
		for _, d := range dirs {
			for _, sub := range []string{"", "objects", filepath.Join("layer", ".git", "objects")} {
				t := filepath.Join(d, sub, "written-by-case")
				c.attempt("write-closure", t, os.WriteFile(t, []byte("written by the fake Case\n"), 0o644), nil)
			}
		}
		return nil
	}
}

// awaitCopy waits for PATH (a marker a test makes once it has changed the
// source), then copies the fixture's README.md into the note: what Case
// saw of a file the source changed during the run.
func awaitCopy(path string) func(*caseRun) error {
	return func(c *caseRun) error {
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := os.Lstat(path); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s did not appear within a minute", path)
			}
			time.Sleep(10 * time.Millisecond)
		}
		data, err := os.ReadFile("README.md")
		if err != nil {
			return err
		}
		return c.writeNote("README.md: " + string(data))
	}
}
