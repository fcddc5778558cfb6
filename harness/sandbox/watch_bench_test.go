package sandbox_test

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/egress"
	"github.com/cto-harness/cto-harness/harness/notify"
	"github.com/cto-harness/cto-harness/harness/sandbox"
)

// BenchmarkWatchedSend measures what the connection watch adds to a call
// it is handed. Inside a sandbox with an egress layout, it times 20,000
// UDP datagrams to loopback sent with sendto(2) and the address (each call
// goes to the harness and back) and 20,000 sent with write(2) on a
// connected socket (not watched), and reports the difference per call
// ("watch-us/call").
func BenchmarkWatchedSend(b *testing.B) {
	requireSandbox(b)
	const calls = 20000
	bx := newBox(b)
	l, err := egress.ParseList([]string{"127.0.0.1:8080"}, egress.SourceFlag, nil)
	if err != nil {
		b.Fatal(err)
	}
	plan := egress.NewPlan(egress.CommandCase, l)
	hosts := filepath.Join(bx.root, "hosts")
	if err := os.WriteFile(hosts, plan.Hosts(), 0o644); err != nil {
		b.Fatal(err)
	}
	run := func(mode string) time.Duration {
		f := egress.New(egress.Options{Policy: egress.Policy{Case: l}})
		defer f.Close()
		ctl, connects, err := f.Attach(plan)
		if err != nil {
			b.Fatal(err)
		}
		watchCtl, w, err := notify.Attach(notify.Options{Connect: connects})
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		p := bx.policy()
		p.Network = &sandbox.Network{Ports: plan.Ports, ProxyPort: plan.ProxyPort, HostsFile: hosts}
		r := launchWith(b, p, bx.fixture, opts{extra: []*os.File{ctl, watchCtl}}, self(b), helperCmd, "udpsend", strconv.Itoa(calls), mode).result(b)
		if !r.OK {
			b.Fatalf("udpsend %s: %s %s", mode, r.Errno, r.Err)
		}
		return time.Duration(r.Count)
	}
	var watched, plain time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		watched += run("sendto")
		plain += run("write")
	}
	b.ReportMetric(float64(watched-plain)/float64(b.N)/calls/1e3, "watch-us/call")
	b.ReportMetric(float64(plain)/float64(b.N)/calls/1e3, "plain-us/call")
}

// BenchmarkRefusedSocket measures what the socket watch adds to a refused
// socket(2): 5,000 socket(AF_VSOCK) calls refused by the kernel's filter
// alone, and 5,000 handed to the harness, refused and recorded in a
// network.jsonl (a file, as in a run); it reports both per call.
func BenchmarkRefusedSocket(b *testing.B) {
	requireSandbox(b)
	const calls = 5000
	bx := newBox(b)
	run := func(watched bool) time.Duration {
		p := bx.policy()
		var o opts
		if watched {
			log, err := os.Create(filepath.Join(bx.root, "network.jsonl"))
			if err != nil {
				b.Fatal(err)
			}
			defer log.Close()
			f := egress.New(egress.Options{Log: log})
			defer f.Close()
			watchCtl, w, err := notify.Attach(notify.Options{Socket: f.RefuseSockets(egress.CommandCase)})
			if err != nil {
				b.Fatal(err)
			}
			defer w.Close()
			p.SocketWatch = true
			o.extra = []*os.File{watchCtl}
		}
		r := launchWith(b, p, bx.fixture, o, self(b), helperCmd, "vsocks", strconv.Itoa(calls)).result(b)
		if !r.OK {
			b.Fatalf("vsocks: %s %s", r.Errno, r.Err)
		}
		return time.Duration(r.Count)
	}
	var watched, plain time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		watched += run(true)
		plain += run(false)
	}
	b.ReportMetric(float64(watched)/float64(b.N)/calls/1e3, "watched-us/call")
	b.ReportMetric(float64(plain)/float64(b.N)/calls/1e3, "kernel-us/call")
}
