package workload

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Percentile is the p-th percentile (0 < p <= 100) of ds by the
// nearest-rank method: the smallest value with at least p% of the values
// at or below it, so it is always one of the samples. Zero for no
// samples; p outside (0, 100] is clamped.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	return nearestRank(sorted, p)
}

func nearestRank(sorted []time.Duration, p float64) time.Duration {
	p = min(max(p, 0), 100)
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Summary describes a set of durations.
type Summary struct {
	Count int           `json:"count"`
	Min   time.Duration `json:"min"`
	P50   time.Duration `json:"p50"`
	P90   time.Duration `json:"p90"`
	P99   time.Duration `json:"p99"`
	Max   time.Duration `json:"max"`
	Mean  time.Duration `json:"mean"`
}

// Summarize computes the Summary of ds (all zero for none).
func Summarize(ds []time.Duration) Summary {
	if len(ds) == 0 {
		return Summary{}
	}
	sorted := slices.Clone(ds)
	slices.Sort(sorted)
	var sum time.Duration
	for _, d := range sorted {
		sum += d
	}
	return Summary{
		Count: len(sorted),
		Min:   sorted[0],
		P50:   nearestRank(sorted, 50),
		P90:   nearestRank(sorted, 90),
		P99:   nearestRank(sorted, 99),
		Max:   sorted[len(sorted)-1],
		Mean:  sum / time.Duration(len(sorted)),
	}
}

// String prints the summary in milliseconds.
func (s Summary) String() string {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.0fms", float64(d)/float64(time.Millisecond)) }
	return fmt.Sprintf("n=%d p50=%s p90=%s p99=%s max=%s", s.Count, ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
}
