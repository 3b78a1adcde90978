// Package linechart draws line charts as SVG: a title and subtitle, axes
// fitted to the data with "nice" ticks (1, 2 or 5 times a power of ten;
// logarithmic for values spanning decades, such as latencies), up to ten
// colour-blind-friendly lines and dashed ones past that, and a legend.
// Long series are thinned to what the pixels can show. Bands shade spans
// of X behind the lines (the time a fault was active), and Stack puts
// several charts one above the other in one document. The output is
// deterministic: the same chart always gives the same bytes, so rendered
// charts can be committed and diffed. It has no dependency beyond the
// standard library; the benchmark report (bench/report) and the chaos
// report (lab/chaos/report) draw their plots with it.
package linechart

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Chart is a line chart ready to render.
type Chart struct {
	// Title is drawn (shortened past 72 characters) and is the SVG's
	// <title> in full; Subtitle is drawn under it.
	Title, Subtitle string
	XLabel, YLabel  string
	// Lines are drawn in order, each in the next colour.
	Lines []Line
	// Bands are shaded behind the lines, each in the next light colour;
	// the X axis covers them.
	Bands []Band
	// LogX marks an X axis of values that may span orders of magnitude,
	// such as latencies: logarithmic when the data are positive and span
	// at least two decades, otherwise linear without being forced to
	// start at 0 (as other X axes are: counts and elapsed time read best
	// from zero).
	LogX bool
}

// Line is one series of points, drawn in X order as given; points with
// a NaN or infinite coordinate are left out.
type Line struct {
	// Name is the legend entry (shortened past 33 characters) and the
	// line's tooltip in full.
	Name string
	X, Y []float64
}

// Band is a span of X shaded across the plot's height, such as the time
// a fault was active; bands may overlap. A band with a NaN or infinite
// end is left out, and one of no width is drawn one pixel wide.
type Band struct {
	// Name is drawn at the band's top (shortened past 24 characters) and
	// is its tooltip in full.
	Name     string
	From, To float64
}

// Layout of every chart, in pixels: 800×450 with the legend on the right,
// wide enough for the longest action name (DescribeNetworkInterfaceAttribute).
const (
	svgWidth     = 800
	svgHeight    = 450
	plotLeft     = 72
	plotRight    = 560
	plotTop      = 56
	plotBottom   = 392
	legendX      = 572
	legendRow    = 18
	legendMaxLen = 33 // runes of a legend label before it is shortened
	titleMaxLen  = 72 // runes of the drawn title; the full one is the SVG's <title>
	bandMaxLen   = 24 // runes of a band's label before it is shortened
	bandRows     = 3  // label rows, so that labels of nearby bands do not overlap
)

// palette is Tableau 10, distinguishable for most colour-blind readers;
// lines past the tenth repeat it dashed.
var palette = []string{
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
	"#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac",
}

// bandPalette is Tableau 20's light half: bands read as background to
// the lines drawn over them.
var bandPalette = []string{
	"#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6", "#8cd17d",
	"#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6", "#d3d3d3",
}

// SVG draws c as an SVG document of 800×450 pixels. It uses only
// fixed-precision numbers and ordered data, so the same chart always
// gives the same bytes.
func (c *Chart) SVG() []byte {
	var b bytes.Buffer
	openSVG(&b, c.Title, svgHeight)
	c.draw(&b)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// Stack draws charts one above the other as one SVG document titled
// title, each in a panel of 800×450 pixels with its own axes: give them
// the same X data (and bands) to have their X axes line up. Like SVG, it
// always gives the same bytes for the same charts.
func Stack(title string, charts []Chart) []byte {
	var b bytes.Buffer
	openSVG(&b, title, len(charts)*svgHeight)
	for i := range charts {
		fmt.Fprintf(&b, `<svg y="%d" width="%d" height="%d">`+"\n", i*svgHeight, svgWidth, svgHeight)
		b.WriteString("<title>" + esc(charts[i].Title) + "</title>\n")
		charts[i].draw(&b)
		b.WriteString("</svg>\n")
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// openSVG starts a document svgWidth wide and height high, with its
// title.
func openSVG(b *bytes.Buffer, title string, height int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgWidth, height, svgWidth, height)
	b.WriteString("<title>" + esc(title) + "</title>\n")
}

// draw writes c's elements, from the background up, into the current
// 800×450 viewport.
func (c *Chart) draw(b *bytes.Buffer) {
	xa, ya := chartAxes(c)
	fmt.Fprintf(b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", svgWidth, svgHeight)
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="16" font-weight="bold" fill="#222222">%s</text>`+"\n", plotLeft, esc(shorten(c.Title, titleMaxLen)))
	if c.Subtitle != "" {
		fmt.Fprintf(b, `<text x="%d" y="42" font-size="11" fill="#555555">%s</text>`+"\n", plotLeft, esc(c.Subtitle))
	}
	drawGrid(b, &xa, &ya)
	drawBands(b, &xa, c.Bands)
	drawAxisLabels(b, c)
	for i, l := range c.Lines {
		drawLine(b, &xa, &ya, l, i)
	}
	drawLegend(b, c.Lines)
}

// chartAxes fits the axes to the finite data of every line, and the X
// axis to the bands too.
func chartAxes(c *Chart) (axis, axis) {
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, l := range c.Lines {
		for i := range l.X {
			x, y := l.X[i], l.Y[i]
			if !finite(x) || !finite(y) {
				continue
			}
			xmin, xmax = math.Min(xmin, x), math.Max(xmax, x)
			ymin, ymax = math.Min(ymin, y), math.Max(ymax, y)
		}
	}
	for _, band := range c.Bands {
		if finite(band.From) && finite(band.To) {
			xmin, xmax = math.Min(xmin, math.Min(band.From, band.To)), math.Max(xmax, math.Max(band.From, band.To))
		}
	}
	if math.IsInf(xmin, 1) { // nothing finite to draw
		xmin, xmax = 0, 1
	}
	if math.IsInf(ymin, 1) { // no line, perhaps bands
		ymin, ymax = 0, 1
	}
	var xa axis
	if c.LogX && xmin > 0 && xmax/xmin >= 100 {
		xa = logAxis(xmin, xmax, plotLeft, plotRight)
	} else {
		xa = linearAxis(xmin, xmax, plotLeft, plotRight, 8, !c.LogX)
	}
	ya := linearAxis(ymin, ymax, plotBottom, plotTop, 5, true)
	return xa, ya
}

// drawGrid draws the plot frame, grid lines and tick labels.
func drawGrid(b *bytes.Buffer, xa, ya *axis) {
	b.WriteString(`<g stroke="#e3e3e3" stroke-width="1">` + "\n")
	for _, t := range xa.ticks {
		x := num(xa.pos(t))
		fmt.Fprintf(b, `<line x1="%s" y1="%d" x2="%s" y2="%d"/>`+"\n", x, plotTop, x, plotBottom)
	}
	for _, t := range ya.ticks {
		y := num(ya.pos(t))
		fmt.Fprintf(b, `<line x1="%d" y1="%s" x2="%d" y2="%s"/>`+"\n", plotLeft, y, plotRight, y)
	}
	b.WriteString("</g>\n")
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888888"/>`+"\n",
		plotLeft, plotTop, plotRight-plotLeft, plotBottom-plotTop)
	b.WriteString(`<g font-size="11" fill="#333333">` + "\n")
	for _, t := range xa.ticks {
		fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle">%s</text>`+"\n", num(xa.pos(t)), plotBottom+16, esc(xa.label(t)))
	}
	for _, t := range ya.ticks {
		fmt.Fprintf(b, `<text x="%d" y="%s" text-anchor="end">%s</text>`+"\n", plotLeft-6, num(ya.pos(t)+4), esc(ya.label(t)))
	}
	b.WriteString("</g>\n")
}

// drawBands shades each band across the plot's height, with its name at
// the top: left-aligned in the left half of the plot and right-aligned in
// the right half, so that it stays inside the plot, and on one of
// bandRows rows, so that labels of nearby bands do not overlap.
func drawBands(b *bytes.Buffer, xa *axis, bands []Band) {
	for i, band := range bands {
		if !finite(band.From) || !finite(band.To) {
			continue
		}
		x0, x1 := bandPixels(xa, band)
		fmt.Fprintf(b, "<g><title>%s</title>\n", esc(band.Name))
		fmt.Fprintf(b, `<rect x="%s" y="%d" width="%s" height="%d" fill="%s" fill-opacity="0.45"/>`+"\n",
			num(x0), plotTop, num(max(x1-x0, 1)), plotBottom-plotTop, bandPalette[i%len(bandPalette)])
		x, anchor := x0+3, "start"
		if x0 > (plotLeft+plotRight)/2 {
			x, anchor = max(x0, x1)-3, "end"
		}
		fmt.Fprintf(b, `<text x="%s" y="%d" font-size="10" fill="#444444" text-anchor="%s">%s</text>`+"\n",
			num(x), plotTop+12+(i%bandRows)*12, anchor, esc(shorten(band.Name, bandMaxLen)))
		b.WriteString("</g>\n")
	}
}

// bandPixels returns the pixels of band's ends, in order, clamped to the
// plot (a log axis cannot place values at or below zero).
func bandPixels(xa *axis, band Band) (x0, x1 float64) {
	pos := func(v float64) float64 {
		if xa.log && v <= 0 {
			return plotLeft
		}
		return min(max(xa.pos(v), plotLeft), plotRight)
	}
	x0, x1 = pos(band.From), pos(band.To)
	return min(x0, x1), max(x0, x1)
}

// drawAxisLabels names the axes.
func drawAxisLabels(b *bytes.Buffer, c *Chart) {
	fmt.Fprintf(b, `<text x="%s" y="%d" text-anchor="middle" fill="#222222">%s</text>`+"\n",
		num((plotLeft+plotRight)/2.0), svgHeight-20, esc(c.XLabel))
	cy := num((plotTop + plotBottom) / 2.0)
	fmt.Fprintf(b, `<text x="18" y="%s" text-anchor="middle" fill="#222222" transform="rotate(-90 18 %s)">%s</text>`+"\n",
		cy, cy, esc(c.YLabel))
}

// drawLine draws the i-th line: a polyline, or dots when it has a single
// point (a polyline of one point is invisible).
func drawLine(b *bytes.Buffer, xa, ya *axis, l Line, i int) {
	pts := pixelPoints(xa, ya, l)
	if len(pts) == 0 {
		return
	}
	color, dash := lineStyle(i)
	fmt.Fprintf(b, "<g><title>%s</title>\n", esc(l.Name))
	if len(pts) == 1 {
		fmt.Fprintf(b, `<circle cx="%s" cy="%s" r="3" fill="%s"/>`+"\n", num(pts[0][0]), num(pts[0][1]), color)
	} else {
		var p bytes.Buffer
		for j, pt := range pts {
			if j > 0 {
				p.WriteByte(' ')
			}
			p.WriteString(num(pt[0]) + "," + num(pt[1]))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="2" stroke-linejoin="round"%s points="%s"/>`+"\n",
			color, dash, p.String())
	}
	b.WriteString("</g>\n")
}

// lineStyle returns the colour and dash attribute of the i-th line.
func lineStyle(i int) (color, dash string) {
	color = palette[i%len(palette)]
	if i >= len(palette) {
		dash = ` stroke-dasharray="6 3"`
	}
	return color, dash
}

// drawLegend lists the lines right of the plot; names too long for the
// column are shortened, with the full name as a tooltip.
func drawLegend(b *bytes.Buffer, lines []Line) {
	rows := (plotBottom - plotTop) / legendRow
	for i, l := range lines {
		y := plotTop + 8 + i*legendRow
		if i == rows-1 && len(lines) > rows {
			fmt.Fprintf(b, `<text x="%d" y="%d" fill="#555555">+%d more</text>`+"\n", legendX, y+4, len(lines)-i)
			return
		}
		color, dash := lineStyle(i)
		fmt.Fprintf(b, "<g><title>%s</title>\n", esc(l.Name))
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/>`+"\n",
			legendX, y, legendX+22, y, color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="10.5" fill="#222222">%s</text>`+"\n", legendX+28, y+4, esc(shorten(l.Name, legendMaxLen)))
		b.WriteString("</g>\n")
	}
}

// pixelPoints maps l to pixels and thins it: of the points falling in one
// pixel column it keeps the first, lowest, highest and last, which keeps
// the drawn shape while bounding the file size for long series.
func pixelPoints(xa, ya *axis, l Line) [][2]float64 {
	var all [][2]float64
	for i := range l.X {
		x, y := l.X[i], l.Y[i]
		if !finite(x) || !finite(y) || (xa.log && x <= 0) {
			continue
		}
		all = append(all, [2]float64{xa.pos(x), ya.pos(y)})
	}
	var out [][2]float64
	for start := 0; start < len(all); {
		col := math.Floor(all[start][0])
		end := start
		lo, hi := start, start
		for end < len(all) && math.Floor(all[end][0]) == col {
			if all[end][1] < all[lo][1] {
				lo = end
			}
			if all[end][1] > all[hi][1] {
				hi = end
			}
			end++
		}
		keep := []int{start, lo, hi, end - 1}
		slices.Sort(keep)
		last := -1
		for _, k := range keep {
			if k != last {
				out = append(out, all[k])
				last = k
			}
		}
		start = end
	}
	return out
}

// num prints a pixel coordinate with one decimal, never "-0".
func num(v float64) string {
	v = math.Round(v*10)/10 + 0
	if v == 0 {
		return "0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// esc escapes text for XML character data and attribute values.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writes to a bytes.Buffer cannot fail
	return b.String()
}

// shorten cuts s to n runes, marking the cut with an ellipsis.
func shorten(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
