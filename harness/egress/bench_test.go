package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

const benchBytes = 50 << 20

// BenchmarkDownload50MB downloads 50 MB from a loopback HTTP server, once
// directly and once through the forwarder (a connection to an allowed name's
// address, relayed to the server), in alternating order, and reports the
// forwarder's time over the direct time ("x-direct"; the target is < 1.10).
func BenchmarkDownload50MB(b *testing.B) {
	payload := make([]byte, 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(benchBytes))
		for i := 0; i < benchBytes/len(payload); i++ {
			if _, err := w.Write(payload); err != nil {
				return
			}
		}
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	upstream := ln.Addr().String()
	_, port, _ := net.SplitHostPort(upstream)
	l, _ := ParseList([]string{"bench.test:" + port}, SourceFlag, nil)
	plan := NewPlan(CommandCase, l)
	direct, err := net.Listen("tcp", net.JoinHostPort(plan.Names["bench.test"].String(), port))
	if err != nil {
		b.Skipf("cannot listen on %s: %v", plan.Names["bench.test"], err)
	}
	proxy, _ := net.Listen("tcp", "127.0.0.1:0")
	f := New(Options{Policy: Policy{Case: l}, Limits: Limits{MaxConns: 32, MaxBytes: 1 << 40}, Log: io.Discard,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, upstream)
		}})
	if err := f.Serve(plan, []net.Listener{direct}, proxy); err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	via := direct.Addr().String()
	buf := make([]byte, 1<<20) // a client that reads in large blocks, as curl does
	get := func(addr string) time.Duration {
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		start := time.Now()
		resp, err := (&http.Client{Transport: tr}).Get("http://" + addr + "/")
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{resp.Body}, buf)
		resp.Body.Close()
		if err != nil || n != benchBytes {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		return time.Since(start)
	}
	get(upstream) // warm up both paths
	get(via)
	var tDirect, tFwd time.Duration
	b.SetBytes(benchBytes)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			tDirect += get(upstream)
			tFwd += get(via)
		} else {
			tFwd += get(via)
			tDirect += get(upstream)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(tFwd)/float64(tDirect), "x-direct")
	b.ReportMetric(float64(tDirect.Milliseconds())/float64(b.N), "direct-ms/op")
	b.ReportMetric(float64(tFwd.Milliseconds())/float64(b.N), "forwarder-ms/op")
}
