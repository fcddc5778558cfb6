package sandbox_test

import (
	"testing"
	"time"
)

// BenchmarkLaunchTrue is what the sandbox costs one command: /bin/true
// through the launcher (namespaces, mounts, capability drop, seccomp,
// Landlock, rlimits) against the same program started directly. Every
// trial of a batch pays this twice (Case and the verification), so it
// bounds how far concurrent trials can overlap on a small machine.
func BenchmarkLaunchTrue(b *testing.B) {
	requireSandbox(b)
	box := newBox(b)
	var boxed, direct time.Duration
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if o := launch(b, box.policy(), box.fixture, "/bin/true"); o.code != 0 {
			b.Fatalf("sandboxed /bin/true: exit %d, stderr %q", o.code, o.stderr)
		}
		boxed += time.Since(start)
		start = time.Now()
		if o := launchWith(b, box.policy(), box.fixture, opts{bare: true}, "/bin/true"); o.code != 0 {
			b.Fatalf("direct /bin/true: exit %d, stderr %q", o.code, o.stderr)
		}
		direct += time.Since(start)
	}
	n := float64(b.N)
	b.ReportMetric(float64(boxed.Microseconds())/n/1000, "sandboxed-ms")
	b.ReportMetric(float64(direct.Microseconds())/n/1000, "direct-ms")
	b.ReportMetric(boxed.Seconds()/direct.Seconds(), "sandboxed/direct")
}
