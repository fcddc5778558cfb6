package validators

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	ctoharness "github.com/cto-harness/cto-harness"
	"github.com/cto-harness/cto-harness/fixtures"
	"github.com/cto-harness/cto-harness/harness/evidence"
)

// attack is what a sandbox row needs around its run: a listener to connect
// to, a secret in the harness's own environment, and the checks afterwards.
type attack struct {
	ln         net.Listener
	accepted   atomic.Int32
	secretName string
	setSecret  bool
	net        *netServers // the egress rows' endpoints
	view       *viewAttack // planted secrets and the source's metadata (attackview.go)
	hostReach  *hostAttack // the host socket and keyring (attackhost.go)
}

// secretVar is put in the harness's own environment for the read-secret row.
const secretVar = "CTO_HARNESS_MATRIX_SECRET"

func newAttack(row fixtures.Row) (*attack, error) {
	a := &attack{net: newNetServers(row)}
	if strings.Contains(row.Setup.Scenario, "{listener}") {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("start the loopback listener: %w", err)
		}
		a.ln = ln
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				a.accepted.Add(1)
				c.Close()
			}
		}()
	}
	if strings.Contains(row.Setup.Scenario, "{secret}") {
		// The row needs a secret that only the harness process holds; it is
		// set for this replay alone and removed afterwards.
		a.secretName = secretVar
		if err := os.Setenv(secretVar, "do-not-leak-"+fmt.Sprint(time.Now().UnixNano())); err != nil {
			return nil, err
		}
		a.setSecret = true
	}
	return a, nil
}

func (a *attack) listenAddr() string {
	if a.ln == nil {
		return ""
	}
	return a.ln.Addr().String()
}

func (a *attack) close() {
	a.net.close()
	a.hostReach.close()
	if a.ln != nil {
		a.ln.Close()
	}
	if a.setSecret {
		os.Unsetenv(secretVar)
	}
}

// checkDenied requires that Case recorded at least one attempt and that
// every attempt was denied.
func (a *attack) checkDenied(runDir string, res *RowResult) {
	f, err := os.Open(filepath.Join(runDir, evidence.CaseEvents))
	if err != nil {
		res.fail("no Case events to check the attempts against: %v", err)
		return
	}
	defer f.Close()
	attempts := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		var e struct {
			Type    ctoharness.EventType `json:"type"`
			Attempt string               `json:"attempt"`
			Denied  bool                 `json:"denied"`
			Message string               `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Type != ctoharness.EvCaseLog || e.Attempt == "" {
			continue
		}
		attempts++
		if !e.Denied {
			res.fail("attempt not denied: %s", e.Message)
		}
	}
	if attempts == 0 {
		res.fail("Case recorded no attempt; the row proves nothing")
	}
}

// checkAfter checks what must hold once the run is over: no connection
// reached the listener, and no process of the run is still alive.
func (a *attack) checkAfter(rep *ctoharness.Report, res *RowResult) {
	if a.ln != nil && a.accepted.Load() > 0 {
		res.fail("%d connection(s) reached the loopback listener", a.accepted.Load())
	}
	roots := []string{rep.RunArtifactDir, rep.RuntimeWorkspaceRoot}
	deadline := time.Now().Add(2 * time.Second)
	for {
		alive := processesIn(roots)
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			res.fail("process(es) of the run still alive after it ended: %s", strings.Join(alive, ", "))
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesIn lists processes whose working directory lies under one of roots.
func processesIn(roots []string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		for _, r := range roots {
			if under(cwd, r) {
				out = append(out, e.Name()+" ("+cwd+")")
			}
		}
	}
	return out
}
