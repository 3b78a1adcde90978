package linechart

import (
	"math"
	"reflect"
	"testing"
)

func TestAxisTicks(t *testing.T) {
	a := linearAxis(3, 97, 0, 100, 5, true)
	if want := []float64{0, 20, 40, 60, 80, 100}; !reflect.DeepEqual(a.ticks, want) {
		t.Errorf("linear ticks %v, want %v", a.ticks, want)
	}
	if a.pos(50) != 50 {
		t.Errorf("pos(50) = %v", a.pos(50))
	}
	f := linearAxis(0, 1, 0, 100, 5, true)
	var labels []string
	for _, v := range f.ticks {
		labels = append(labels, f.label(v))
	}
	if want := []string{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}; !reflect.DeepEqual(labels, want) {
		t.Errorf("fraction labels %v, want %v", labels, want)
	}
	l := logAxis(3, 40_000, 0, 400)
	labels = nil
	for _, v := range l.ticks {
		labels = append(labels, l.label(v))
	}
	if want := []string{"1", "10", "100", "1000", "10k", "100k"}; !reflect.DeepEqual(labels, want) {
		t.Errorf("log labels %v, want %v", labels, want)
	}
	if p := l.pos(1000); math.Abs(p-240) > 1e-9 {
		t.Errorf("log pos(1000) = %v, want 240", p)
	}
	if got := fmtTick(math.Copysign(0, -1), 0); got != "0" {
		t.Errorf("fmtTick(-0) = %q", got)
	}
}

func TestLatencyAxisNotFromZero(t *testing.T) {
	// Latencies all near 5.8 s fill the chart instead of a sliver at its
	// right edge; elapsed time still starts at 0.
	c := Chart{Lines: []Line{{X: []float64{5780, 5890}, Y: []float64{0.5, 1}}}, LogX: true}
	xa, ya := chartAxes(&c)
	if xa.log || xa.lo < 5700 || xa.hi > 5900 {
		t.Errorf("latency axis [%v, %v] log=%v, want about [5780, 5890]", xa.lo, xa.hi, xa.log)
	}
	if ya.lo != 0 {
		t.Errorf("fraction axis starts at %v, want 0", ya.lo)
	}
	c.LogX = false
	if xa, _ := chartAxes(&c); xa.lo != 0 {
		t.Errorf("time axis starts at %v, want 0", xa.lo)
	}
	// Spanning decades, the axis is logarithmic.
	c = Chart{Lines: []Line{{X: []float64{3, 40_000}, Y: []float64{0.5, 1}}}, LogX: true}
	if xa, _ := chartAxes(&c); !xa.log {
		t.Errorf("latencies from 3 to 40,000 on a linear axis [%v, %v]", xa.lo, xa.hi)
	}
}
