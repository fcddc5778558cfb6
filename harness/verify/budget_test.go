package verify

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestBudget(t *testing.T) {
	b := NewBudget(time.Second, 3)
	d, err := b.Reserve(5 * time.Second)
	if err != nil || d != time.Second {
		t.Fatalf("first: %s %v", d, err)
	}
	b.Charge(600 * time.Millisecond)
	if d, err = b.Reserve(5 * time.Second); err != nil || d != 400*time.Millisecond {
		t.Fatalf("capped to what is left: %s %v", d, err)
	}
	b.Charge(100 * time.Millisecond)
	if d, err = b.Reserve(100 * time.Millisecond); err != nil || d != 100*time.Millisecond {
		t.Fatalf("a shorter timeout is kept: %s %v", d, err)
	}
	if _, err = b.Reserve(time.Second); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("run cap: %v", err)
	}
	u := b.Usage()
	if u.Runs != 3 || u.UsedMs != 700 || u.RemainingMs != 300 || u.TotalMs != 1000 {
		t.Fatalf("usage %+v", u)
	}

	spent := NewBudget(time.Second, 10)
	_, _ = spent.Reserve(time.Second)
	spent.Charge(2 * time.Second)
	if _, err := spent.Reserve(time.Second); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("time spent: %v", err)
	}
	if spent.Usage().RemainingMs != 0 {
		t.Fatal("remaining below zero")
	}

	for _, bad := range []*Budget{nil, NewBudget(0, 1), NewBudget(time.Second, 0)} {
		if _, err := bad.Reserve(time.Second); !errors.Is(err, ErrGovernance) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if _, err := NewBudget(time.Second, 1).Reserve(0); !errors.Is(err, ErrGovernance) {
		t.Errorf("zero timeout: %v", err)
	}
}

func TestCapture(t *testing.T) {
	c := NewCapture("stdout", 100)
	c.Write([]byte(strings.Repeat("a", 60)))
	c.Write([]byte(strings.Repeat("b", 40)))
	if s, trunc := c.Text(); trunc || len(s) != 100 {
		t.Fatalf("exactly at the cap: %d %v", len(s), trunc)
	}
	c.Write([]byte("c"))
	s, trunc := c.Text()
	if !trunc || len(s) > 100 || !strings.HasPrefix(s, "aaaa") || !strings.Contains(s, "stdout truncated: 101 bytes written") {
		t.Fatalf("over the cap: %q %v", s, trunc)
	}
	if c.Total() != 101 {
		t.Fatal("total")
	}

	// A multi-byte character is never cut in half.
	u := NewCapture("stderr", 80)
	u.Write([]byte(strings.Repeat("é", 100)))
	s, _ = u.Text()
	if !utf8.ValidString(s) || len(s) > 80 {
		t.Fatalf("%q", s)
	}
}
