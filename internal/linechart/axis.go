package linechart

import (
	"math"
	"strconv"
	"strings"
)

// axis maps data values to pixels along one direction and knows its ticks.
type axis struct {
	lo, hi   float64 // data range, inclusive
	p0, p1   float64 // pixels of lo and hi
	log      bool
	ticks    []float64
	decimals int // for tick labels on a linear axis
}

// pos returns the pixel of v.
func (a *axis) pos(v float64) float64 {
	if a.log {
		v, lo, hi := math.Log10(v), math.Log10(a.lo), math.Log10(a.hi)
		return a.p0 + (v-lo)/(hi-lo)*(a.p1-a.p0)
	}
	return a.p0 + (v-a.lo)/(a.hi-a.lo)*(a.p1-a.p0)
}

// label prints a tick value.
func (a *axis) label(v float64) string {
	if a.log {
		return fmtTick(v, max(0, -int(math.Floor(math.Log10(v)+1e-9))))
	}
	return fmtTick(v, a.decimals)
}

// linearAxis spans [min, max] of the data, rounded out to "nice" tick
// steps (1, 2 or 5 times a power of ten). With fromZero it includes 0 for
// non-negative data: counts and elapsed time read best from zero, while
// latencies that all sit near 5 s would be squeezed into a sliver.
func linearAxis(dmin, dmax, p0, p1 float64, want int, fromZero bool) axis {
	if fromZero && dmin > 0 {
		dmin = 0
	}
	if dmax <= dmin {
		dmax = dmin + 1
	}
	step := niceStep((dmax - dmin) / float64(want))
	lo := math.Floor(dmin/step+1e-9) * step
	hi := math.Ceil(dmax/step-1e-9) * step
	a := axis{lo: lo, hi: hi, p0: p0, p1: p1, decimals: max(0, -int(math.Floor(math.Log10(step)+1e-9)))}
	n := int(math.Round((hi - lo) / step))
	for i := 0; i <= n; i++ {
		a.ticks = append(a.ticks, roundResidue(lo+float64(i)*step))
	}
	return a
}

// logAxis spans whole decades around [dmin, dmax] (dmin > 0); with few
// decades it labels 2 and 5 times each power of ten as well.
func logAxis(dmin, dmax, p0, p1 float64) axis {
	e0 := math.Floor(math.Log10(dmin) + 1e-9)
	e1 := math.Ceil(math.Log10(dmax) - 1e-9)
	if e1 <= e0 {
		e1 = e0 + 1
	}
	a := axis{lo: math.Pow(10, e0), hi: math.Pow(10, e1), p0: p0, p1: p1, log: true}
	mults := []float64{1}
	if e1-e0 <= 3 {
		mults = []float64{1, 2, 5}
	}
	for e := e0; e <= e1; e++ {
		for _, m := range mults {
			v := roundResidue(m * math.Pow(10, e))
			if v <= a.hi*(1+1e-9) {
				a.ticks = append(a.ticks, v)
			}
		}
	}
	return a
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsNaN(raw) || math.IsInf(raw, 0) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / p; {
	case f <= 1:
		return p
	case f <= 2:
		return 2 * p
	case f <= 5:
		return 5 * p
	}
	return 10 * p
}

// fmtTick prints a tick value with the given decimals, using k and M for
// large round values so labels stay short.
func fmtTick(v float64, decimals int) string {
	if math.Abs(v) < 1e-12 {
		v = 0 // also turns -0 and rounding residue into 0
	}
	switch a := math.Abs(v); {
	case a >= 1e6 && math.Mod(a, 1e5) == 0:
		return trimZeros(strconv.FormatFloat(v/1e6, 'f', 1, 64)) + "M"
	case a >= 1e4 && math.Mod(a, 1e2) == 0:
		return trimZeros(strconv.FormatFloat(v/1e3, 'f', 1, 64)) + "k"
	}
	return strconv.FormatFloat(v, 'f', decimals, 64)
}

// trimZeros drops a fractional part that is only zeros ("2.0" → "2").
func trimZeros(s string) string {
	if !strings.Contains(s, ".") {
		return s
	}
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// roundResidue removes floating-point residue from a tick value
// (0.6000000000000001 → 0.6) so labels and k/M suffixes come out right.
func roundResidue(v float64) float64 {
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	if err != nil {
		return v
	}
	return r
}
