package testresults_test

import (
	"bufio"
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/cto-harness/cto-harness/harness/testresults"
)

// benchStream is a `go test -json` stream of n tests in 20 packages, each
// test with a run, two output lines and a verdict, as test2json writes it.
func benchStream(n int) []byte {
	var b bytes.Buffer
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Format(time.RFC3339Nano)
	for i := 0; i < n; i++ {
		pkg, name := fmt.Sprintf("example.com/m/pkg%d", i%20), fmt.Sprintf("TestCase%d", i)
		fmt.Fprintf(&b, `{"Time":%q,"Action":"run","Package":%q,"Test":%q}`+"\n", t0, pkg, name)
		fmt.Fprintf(&b, `{"Time":%q,"Action":"output","Package":%q,"Test":%q,"Output":"=== RUN   %s\n"}`+"\n", t0, pkg, name, name)
		fmt.Fprintf(&b, `{"Time":%q,"Action":"output","Package":%q,"Test":%q,"Output":"--- PASS: %s (0.00s)\n"}`+"\n", t0, pkg, name, name)
		fmt.Fprintf(&b, `{"Time":%q,"Action":"pass","Package":%q,"Test":%q,"Elapsed":0.001}`+"\n", t0, pkg, name)
	}
	for p := 0; p < 20; p++ {
		fmt.Fprintf(&b, `{"Time":%q,"Action":"pass","Package":"example.com/m/pkg%d","Elapsed":0.5}`+"\n", t0, p)
	}
	return b.Bytes()
}

// BenchmarkParseGoTestJSON reads a 10 000-test stream into per-test
// results, and reports it as a ratio to the least any reader does: a line
// scan of the same bytes (parse/scan), with the cost per test.
func BenchmarkParseGoTestJSON(b *testing.B) {
	const n = 10000
	data := benchStream(n)
	var parse, scan time.Duration
	b.SetBytes(int64(len(data)))
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := testresults.Parse(testresults.GoTestJSON, data)
		parse += time.Since(start)
		if err != nil || len(res) != n {
			b.Fatalf("%d results, %v", len(res), err)
		}
		start = time.Now()
		sc := bufio.NewScanner(bytes.NewReader(data))
		lines := 0
		for sc.Scan() {
			lines++
		}
		scan += time.Since(start)
		if lines != 4*n+20 {
			b.Fatalf("%d lines", lines)
		}
	}
	b.ReportMetric(float64(parse)/float64(b.N)/n, "ns/test")
	b.ReportMetric(float64(parse)/float64(scan), "parse/scan")
}
