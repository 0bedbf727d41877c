package bench

// This file has no build tag: the plot writer is plain code, tested by `go test ./...`
// (svgplot_test.go) without a control plane.

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// plotPoint is one measurement: x is the number of CRs, y the cost per CR.
type plotPoint struct{ x, y float64 }

// plotSeries is one line of a panel (one controller setting, such as probes on).
type plotSeries struct {
	name   string
	points []plotPoint
}

// plotPanel is one metric against N: a small multiple of its own, with a y axis from 0.
type plotPanel struct {
	title  string
	yLabel string
	series []plotSeries
}

// Geometry of the plot, in SVG user units.
const (
	plotPanelWidth  = 300
	plotPanelHeight = 210
	plotColumns     = 3
	plotMarginLeft  = 58
	plotMarginRight = 14
	plotMarginTop   = 34
	plotMarginBot   = 40
	plotHeader      = 56
)

// plotColors are the series' colours, in order (distinguishable in colour-blind views).
var plotColors = []string{"#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9"}

// writeCostCurve writes panels as one SVG image: small multiples on a grid, each with a
// logarithmic x axis (N) ticked at the measured sizes and a linear y axis from 0, one
// polyline per series with a dot per point, and a shared legend. A flat line is a cost
// per CR that does not grow with N. Every panel has the same x axis, ticked at every size
// any panel has. Points whose y is NaN or infinite are left out.
func writeCostCurve(w io.Writer, title string, panels []plotPanel) error {
	if len(panels) == 0 {
		return fmt.Errorf("no panels to plot")
	}
	rows := (len(panels) + plotColumns - 1) / plotColumns
	cols := min(len(panels), plotColumns)
	width := cols * plotPanelWidth
	height := plotHeader + rows*plotPanelHeight

	var names []string
	var xs []float64
	for _, p := range panels {
		for _, s := range p.series {
			if !slices.Contains(names, s.name) {
				names = append(names, s.name)
			}
			for _, pt := range s.points {
				if finite(pt.y) && pt.x > 0 && !slices.Contains(xs, pt.x) {
					xs = append(xs, pt.x)
				}
			}
		}
	}
	slices.Sort(xs)
	color := func(name string) string { return plotColors[slices.Index(names, name)%len(plotColors)] }

	b := bufio.NewWriter(w)
	pf := func(format string, a ...any) { fmt.Fprintf(b, format, a...) }
	pf(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	pf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		width, height, width, height)
	pf(`<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	pf(`<text x="%d" y="20" font-size="14" font-weight="bold" text-anchor="middle">%s</text>`+"\n", width/2, escapeXML(title))
	// Legend.
	lx := 12.0
	for _, name := range names {
		pf(`<g class="legend"><line x1="%s" y1="40" x2="%s" y2="40" stroke="%s" stroke-width="2"/><circle cx="%s" cy="40" r="3" fill="%s"/><text x="%s" y="44">%s</text></g>`+"\n",
			num(lx), num(lx+24), color(name), num(lx+12), color(name), num(lx+30), escapeXML(name))
		lx += 30 + 7*float64(utf8.RuneCountInString(name)) + 24
	}

	for i, p := range panels {
		ox := float64((i % plotColumns) * plotPanelWidth)
		oy := float64(plotHeader + (i/plotColumns)*plotPanelHeight)
		writePanel(pf, p, xs, ox, oy, color)
	}
	pf("</svg>\n")
	return b.Flush()
}

// writePanel draws one panel with its top left corner at (ox, oy), its x axis ticked at
// xs (sorted).
func writePanel(pf func(string, ...any), p plotPanel, xs []float64, ox, oy float64, color func(string) string) {
	left, right := ox+plotMarginLeft, ox+plotPanelWidth-plotMarginRight
	top, bottom := oy+plotMarginTop, oy+plotPanelHeight-plotMarginBot

	ymax := 0.0
	for _, s := range p.series {
		for _, pt := range s.points {
			if finite(pt.y) && pt.x > 0 {
				ymax = max(ymax, pt.y)
			}
		}
	}
	yTicks := niceTicks(ymax)
	yTop := yTicks[len(yTicks)-1]

	// x: log10 scale over the measured sizes, with a margin of a fifth of a decade (or
	// a single size in the middle).
	xlo, xhi := 1.0, 10.0
	if len(xs) > 0 {
		xlo, xhi = math.Log10(xs[0])-0.2, math.Log10(xs[len(xs)-1])+0.2
	}
	sx := func(x float64) float64 { return left + (math.Log10(x)-xlo)/(xhi-xlo)*(right-left) }
	sy := func(y float64) float64 { return bottom - y/yTop*(bottom-top) }

	pf(`<g class="panel">` + "\n")
	pf(`<text class="title" x="%s" y="%s" font-size="12" font-weight="bold" text-anchor="middle">%s</text>`+"\n",
		num((left+right)/2), num(oy+16), escapeXML(p.title))
	pf(`<rect x="%s" y="%s" width="%s" height="%s" fill="none" stroke="#999"/>`+"\n",
		num(left), num(top), num(right-left), num(bottom-top))
	for _, t := range yTicks {
		y := sy(t)
		pf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(left), num(y), num(right), num(y))
		pf(`<text class="ytick" x="%s" y="%s" text-anchor="end">%s</text>`+"\n", num(left-4), num(y+4), escapeXML(tickLabel(t)))
	}
	for _, x := range xs {
		px := sx(x)
		pf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#ddd"/>`+"\n", num(px), num(top), num(px), num(bottom))
		pf(`<text class="xtick" x="%s" y="%s" text-anchor="middle">%s</text>`+"\n", num(px), num(bottom+14), escapeXML(tickLabel(x)))
	}
	pf(`<text class="xlabel" x="%s" y="%s" text-anchor="middle">N (CRs)</text>`+"\n", num((left+right)/2), num(bottom+30))
	pf(`<text class="ylabel" transform="translate(%s %s) rotate(-90)" text-anchor="middle">%s</text>`+"\n",
		num(ox+14), num((top+bottom)/2), escapeXML(p.yLabel))
	for _, s := range p.series {
		var pts []string
		var dots []plotPoint
		for _, pt := range s.points {
			if !finite(pt.y) || pt.x <= 0 {
				continue
			}
			pts = append(pts, num(sx(pt.x))+","+num(sy(pt.y)))
			dots = append(dots, pt)
		}
		if len(pts) == 0 {
			continue
		}
		pf(`<polyline class="series" data-series="%s" points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n",
			escapeXML(s.name), strings.Join(pts, " "), color(s.name))
		for _, pt := range dots {
			pf(`<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s: N = %s, %s</title></circle>`+"\n",
				num(sx(pt.x)), num(sy(pt.y)), color(s.name), escapeXML(s.name), tickLabel(pt.x), escapeXML(tickLabel(pt.y)))
		}
	}
	pf("</g>\n")
}

// niceTicks returns 0 and up to five round values up to at least ymax (0, 1 when ymax is 0).
func niceTicks(ymax float64) []float64 {
	if !finite(ymax) || ymax <= 0 {
		return []float64{0, 1}
	}
	raw := ymax / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var ticks []float64
	for i := 0; ; i++ {
		t := float64(i) * step
		ticks = append(ticks, t)
		if t >= ymax*(1-1e-9) {
			return ticks
		}
	}
}

// tickLabel writes v with as few digits as it needs (at most three after the point).
func tickLabel(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return thousandsInt(int64(v))
	}
	return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64)
}

// thousandsInt writes n with a comma every three digits.
func thousandsInt(n int64) string {
	if n < 0 {
		return "-" + thousandsInt(-n)
	}
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func escapeXML(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '"':
			b.WriteString("&quot;")
		case '\'':
			b.WriteString("&apos;")
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
