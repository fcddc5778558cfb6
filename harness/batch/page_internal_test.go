package batch

import (
	"math"
	"testing"
)

// The Wilson score interval against values computed by hand from its
// formula (and as statsmodels' proportion_confint(method="wilson") gives).
func TestWilson(t *testing.T) {
	for _, c := range []struct {
		passes, n int
		lo, hi    float64
	}{
		{8, 10, 0.490, 0.943},
		{5, 10, 0.237, 0.763},
		{0, 10, 0, 0.278},
		{10, 10, 0.722, 1},
		{1, 1, 0.207, 1},
		{2, 2, 0.342, 1},
		{45, 50, 0.786, 0.957},
		{0, 0, 0, 1}, // no trial: nothing is known
	} {
		lo, hi := wilson(c.passes, c.n)
		if math.Abs(lo-c.lo) > 0.0005 || math.Abs(hi-c.hi) > 0.0005 {
			t.Errorf("wilson(%d, %d) = [%.4f, %.4f], want [%.3f, %.3f]", c.passes, c.n, lo, hi, c.lo, c.hi)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[float64]float64{0: 1, 0.0042: 0.005, 0.01: 0.01, 0.013: 0.02, 0.3: 0.5, 1: 1, 1.2: 2, 7: 10, 230: 500} {
		if got := niceCeil(in); math.Abs(got-want) > 1e-12 {
			t.Errorf("niceCeil(%g) = %g, want %g", in, got, want)
		}
	}
}
