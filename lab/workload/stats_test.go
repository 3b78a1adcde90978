package workload

import (
	"testing"
	"time"
)

func ms(ns ...int) []time.Duration {
	out := make([]time.Duration, len(ns))
	for i, n := range ns {
		out[i] = time.Duration(n) * time.Millisecond
	}
	return out
}

func TestPercentileNearestRank(t *testing.T) {
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted on purpose
	}
	cases := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p90 of 1..100", ms(hundred...), 90, 90 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"p100 is max", ms(hundred...), 100, 100 * time.Millisecond},
		{"p50 of four rounds up the rank", ms(40, 10, 30, 20), 50, 20 * time.Millisecond},
		{"p99 of ten is the max", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 99, 10 * time.Millisecond},
		{"p0 clamps to min", ms(3, 1, 2), 0, 1 * time.Millisecond},
		{"p above 100 clamps", ms(3, 1, 2), 150, 3 * time.Millisecond},
	}
	for _, c := range cases {
		if got := Percentile(c.in, c.p); got != c.want {
			t.Errorf("%s: Percentile(p=%v) = %v, want %v", c.name, c.p, got, c.want)
		}
	}
}

func TestPercentileLeavesInputAlone(t *testing.T) {
	in := ms(3, 1, 2)
	Percentile(in, 50)
	if in[0] != 3*time.Millisecond || in[1] != time.Millisecond {
		t.Fatalf("input reordered: %v", in)
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize(ms(10, 20, 30, 40, 50, 60, 70, 80, 90, 1000))
	want := Summary{Count: 10, Min: 10 * time.Millisecond, P50: 50 * time.Millisecond, P90: 90 * time.Millisecond,
		P99: 1000 * time.Millisecond, Max: 1000 * time.Millisecond, Mean: 145 * time.Millisecond}
	if s != want {
		t.Fatalf("Summarize = %+v, want %+v", s, want)
	}
	if got := s.String(); got != "n=10 p50=50ms p90=90ms p99=1000ms max=1000ms" {
		t.Errorf("String = %q", got)
	}
	if (Summarize(nil) != Summary{}) {
		t.Errorf("Summarize(nil) = %+v, want zero", Summarize(nil))
	}
}
