package backend

import "testing"

func TestLimiter(t *testing.T) {
	tests := []struct {
		name     string
		lim      Limits
		lines    []int
		accepted int
		hit      bool
	}{
		{"no caps", Limits{}, []int{100, 100, 100}, 3, false},
		{"event cap", Limits{MaxEvents: 2}, []int{10, 10, 10, 10}, 2, true},
		{"byte cap", Limits{MaxBytes: 250}, []int{100, 100, 100, 10}, 2, true},
		{"exactly at the caps", Limits{MaxEvents: 2, MaxBytes: 200}, []int{100, 100}, 2, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			stops := 0
			l := &limiter{Limits: tc.lim, stop: func() { stops++ }}
			for _, n := range tc.lines {
				l.accept(n)
			}
			if l.Events != tc.accepted || (l.Hit != "") != tc.hit || l.Dropped != len(tc.lines)-tc.accepted {
				t.Fatalf("accepted %d dropped %d hit %q", l.Events, l.Dropped, l.Hit)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.hit]; stops != want {
				t.Fatalf("stop called %d times, want %d", stops, want)
			}
		})
	}
}
