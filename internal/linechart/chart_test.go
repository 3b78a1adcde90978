package linechart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strings"
	"testing"
)

// wellFormed fails the test unless svg decodes as XML.
func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
	}
}

var pointsAttr = regexp.MustCompile(`points="([^"]*)"`)

// TestLongSeriesThinned: a long series is drawn with at most four points
// per pixel column, and a line of one point as a dot (a polyline of one
// point is invisible).
func TestLongSeriesThinned(t *testing.T) {
	n := 200_000
	long := Line{Name: "long", X: make([]float64, n), Y: make([]float64, n)}
	for i := range n {
		long.X[i] = float64(i) / 100
		long.Y[i] = float64(i) + 50*math.Sin(float64(i))
	}
	c := Chart{Title: "long", Lines: []Line{long, {Name: "dot", X: []float64{5}, Y: []float64{3}}}}
	svg := c.SVG()
	wellFormed(t, svg)
	m := pointsAttr.FindAllSubmatch(svg, -1)
	if len(m) != 1 {
		t.Fatalf("%d polylines, want 1", len(m))
	}
	if points := len(strings.Fields(string(m[0][1]))); points > 4*(plotRight-plotLeft+1) {
		t.Errorf("%d points drawn for %d pixel columns", points, plotRight-plotLeft)
	}
	if len(svg) > 100_000 {
		t.Errorf("chart of a long series is %d bytes", len(svg))
	}
	if !bytes.Contains(svg, []byte("<circle")) {
		t.Error("single-point line not drawn")
	}
}

// TestSVGEscapesAndRepeats: text is escaped, never interpreted, and the
// same chart gives the same bytes.
func TestSVGEscapesAndRepeats(t *testing.T) {
	c := Chart{Title: `<b>&"quoted" 'x'`, Subtitle: "a < b", XLabel: "x & y", YLabel: "<y>",
		Lines: []Line{{Name: "A<&>B", X: []float64{0, 1}, Y: []float64{0, 1}}, {Name: "nan", X: []float64{math.NaN(), 2}, Y: []float64{1, math.Inf(1)}}}}
	svg := c.SVG()
	wellFormed(t, svg)
	for _, want := range []string{"<title>&lt;b&gt;&amp;&#34;quoted&#34; &#39;x&#39;</title>", "A&lt;&amp;&gt;B", "a &lt; b", "x &amp; y", "&lt;y&gt;"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("%q not in the chart", want)
		}
	}
	if !bytes.Equal(svg, c.SVG()) {
		t.Error("two renders of the same chart differ")
	}
	if !bytes.HasPrefix(svg, []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="800" height="450"`)) {
		t.Errorf("not an 800×450 SVG: %.80s", svg)
	}
}

// TestManyLinesLegend: lines past the palette are dashed, and a legend
// longer than the plot ends in "+N more".
func TestManyLinesLegend(t *testing.T) {
	var c Chart
	for i := range 25 {
		c.Lines = append(c.Lines, Line{Name: strings.Repeat("n", 40) + string(rune('a'+i)), X: []float64{0, 1}, Y: []float64{0, float64(i)}})
	}
	svg := string(c.SVG())
	if got := strings.Count(svg, `stroke-dasharray="6 3"`); got == 0 {
		t.Error("no dashed line past the tenth")
	}
	if !strings.Contains(svg, "more</text>") {
		t.Error("a 25-line legend is not cut short")
	}
	if !strings.Contains(svg, strings.Repeat("n", 32)+"…") {
		t.Error("a long legend label is not shortened")
	}
}

var rectAttrs = regexp.MustCompile(`<rect x="([^"]*)" y="56" width="([^"]*)" height="336" fill="#[0-9a-f]{6}" fill-opacity="0.45"/>`)

// TestBands: bands are shaded behind the lines with their names, the X
// axis covers a band past the data, and a chart without bands draws no
// band at all.
func TestBands(t *testing.T) {
	c := Chart{Title: "bands", Lines: []Line{{Name: "ready", X: []float64{0, 10, 20}, Y: []float64{0, 5, 10}}},
		Bands: []Band{{Name: "kill <terwayd>", From: 5, To: 8}, {Name: "storm", From: 15, To: 30}, {Name: "instant", From: 12, To: 12}, {Name: "bad", From: math.NaN(), To: 3}}}
	svg := c.SVG()
	wellFormed(t, svg)
	m := rectAttrs.FindAllSubmatch(svg, -1)
	if len(m) != 3 {
		t.Fatalf("%d band rectangles, want 3:\n%s", len(m), svg)
	}
	for _, want := range []string{"<title>kill &lt;terwayd&gt;</title>", ">storm</text>", "<title>instant</title>"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("%q not in the chart", want)
		}
	}
	if xa, _ := chartAxes(&c); xa.hi < 30 {
		t.Errorf("X axis ends at %v, before the band ending at 30", xa.hi)
	}
	if string(m[2][2]) != "1" {
		t.Errorf("a band of no width is %s pixels wide, want 1", m[2][2])
	}
	if band, line := bytes.Index(svg, []byte("storm")), bytes.Index(svg, []byte("<polyline")); band > line {
		t.Error("a band is drawn over the lines")
	}
	c.Bands = nil
	if bytes.Contains(c.SVG(), []byte("fill-opacity")) {
		t.Error("a chart without bands has a band")
	}
}

// TestStack: stacked charts are one well-formed document with a panel per
// chart, each drawn as SVG draws it alone.
func TestStack(t *testing.T) {
	charts := []Chart{
		{Title: "first", Lines: []Line{{Name: "a", X: []float64{0, 1}, Y: []float64{0, 1}}}, Bands: []Band{{Name: "f", From: 0.2, To: 0.4}}},
		{Title: "second & last", Lines: []Line{{Name: "b", X: []float64{0, 1}, Y: []float64{3, 1}}}},
	}
	svg := Stack("run <1>", charts)
	wellFormed(t, svg)
	if !bytes.HasPrefix(svg, []byte(`<svg xmlns="http://www.w3.org/2000/svg" width="800" height="900"`)) {
		t.Errorf("not an 800×900 SVG: %.80s", svg)
	}
	if !bytes.Contains(svg, []byte("<title>run &lt;1&gt;</title>")) || !bytes.Contains(svg, []byte(`<svg y="450" width="800" height="450">`)) {
		t.Errorf("stack lacks its title or second panel:\n%s", svg)
	}
	for _, c := range charts {
		alone := c.SVG()
		body := alone[bytes.Index(alone, []byte("<title>")) : len(alone)-len("</svg>\n")]
		if !bytes.Contains(svg, body) {
			t.Errorf("panel %q differs from the chart drawn alone", c.Title)
		}
	}
	if !bytes.Equal(svg, Stack("run <1>", charts)) {
		t.Error("two renders of the same stack differ")
	}
}
