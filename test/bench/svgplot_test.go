package bench

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// svgElement is an element of the written SVG, with its attributes and its own text.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string
	// panel is the index of the enclosing panel group, -1 outside one.
	panel int
}

// parseSVG decodes the whole document (so it must be well-formed XML) and returns its
// elements in order.
func parseSVG(t *testing.T, data []byte) []svgElement {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	var (
		out    []svgElement
		stack  []int
		panels = -1
		inside = -1
	)
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, data)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			e := svgElement{name: tk.Name.Local, attrs: map[string]string{}, panel: inside}
			for _, a := range tk.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			if e.name == "g" && e.attrs["class"] == "panel" {
				panels++
				inside = panels
				e.panel = inside
			}
			out = append(out, e)
			stack = append(stack, len(out)-1)
		case xml.EndElement:
			i := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if out[i].name == "g" && out[i].attrs["class"] == "panel" {
				inside = -1
			}
		case xml.CharData:
			if len(stack) > 0 {
				out[stack[len(stack)-1]].text += string(tk)
			}
		}
	}
	if len(out) == 0 || out[0].name != "svg" {
		t.Fatalf("the root element is not svg:\n%s", data)
	}
	return out
}

func polylinePoints(t *testing.T, e svgElement) [][2]float64 {
	t.Helper()
	var pts [][2]float64
	for _, p := range strings.Fields(e.attrs["points"]) {
		xs, ys, ok := strings.Cut(p, ",")
		x, err1 := strconv.ParseFloat(xs, 64)
		y, err2 := strconv.ParseFloat(ys, 64)
		if !ok || err1 != nil || err2 != nil {
			t.Fatalf("bad point %q in %q", p, e.attrs["points"])
		}
		pts = append(pts, [2]float64{x, y})
	}
	return pts
}

func TestWriteCostCurve(t *testing.T) {
	panels := []plotPanel{
		{title: "status writes per CR", yLabel: "writes", series: []plotSeries{
			{name: "probes off", points: []plotPoint{{50, 2}, {200, 2}, {1000, 2}}},
			{name: "probes on (service)", points: []plotPoint{{50, 3}, {200, 3}, {1000, 3}}},
		}},
		{title: "heap per CR", yLabel: "KiB", series: []plotSeries{
			{name: "probes off", points: []plotPoint{{50, 9.5}, {200, 7.25}, {1000, 6}}},
			// Not measured at N = 50: the point is left out, not drawn at 0.
			{name: "probes on (service)", points: []plotPoint{{50, math.NaN()}, {200, 8}, {1000, 7}}},
		}},
		{title: "idle requests <all but watches> & co", yLabel: "requests", series: []plotSeries{
			{name: "probes off", points: []plotPoint{{1000, 0}}},
		}},
		{title: "CPU per CR", yLabel: "ms", series: []plotSeries{
			{name: "probes off", points: []plotPoint{{50, 4}, {200, 3}, {1000, 3.5}}},
		}},
	}
	var buf bytes.Buffer
	if err := writeCostCurve(&buf, "Cost per CR against N", panels); err != nil {
		t.Fatal(err)
	}
	els := parseSVG(t, buf.Bytes())

	byPanel := make([][]svgElement, len(panels))
	var legend []string
	for _, e := range els {
		if e.panel >= len(panels) {
			t.Fatalf("%d panel groups, want %d", e.panel+1, len(panels))
		}
		if e.panel >= 0 {
			byPanel[e.panel] = append(byPanel[e.panel], e)
		}
		if e.name == "text" && e.panel < 0 && e.text != "Cost per CR against N" {
			legend = append(legend, e.text)
		}
	}
	if want := []string{"probes off", "probes on (service)"}; strings.Join(legend, "|") != strings.Join(want, "|") {
		t.Errorf("legend %q, want %q", legend, want)
	}

	for i, p := range panels {
		var lines []svgElement
		texts := map[string][]string{}
		for _, e := range byPanel[i] {
			switch e.name {
			case "polyline":
				lines = append(lines, e)
			case "text":
				texts[e.attrs["class"]] = append(texts[e.attrs["class"]], e.text)
			}
		}
		if len(lines) != len(p.series) {
			t.Errorf("panel %q: %d polylines, want one per series (%d)", p.title, len(lines), len(p.series))
			continue
		}
		if got := texts["title"]; len(got) != 1 || got[0] != p.title {
			t.Errorf("panel %q: title %q", p.title, got)
		}
		if got := texts["ylabel"]; len(got) != 1 || got[0] != p.yLabel {
			t.Errorf("panel %q: y label %q, want %q", p.title, got, p.yLabel)
		}
		if got := texts["xlabel"]; len(got) != 1 || got[0] != "N (CRs)" {
			t.Errorf("panel %q: x label %q", p.title, got)
		}
		// Every panel's x axis is ticked at exactly the sizes measured in any panel, even
		// one with a single point.
		wantX := []string{"50", "200", "1,000"}
		if strings.Join(texts["xtick"], " ") != strings.Join(wantX, " ") {
			t.Errorf("panel %q: x ticks %q, want %q", p.title, texts["xtick"], wantX)
		}
		// The y axis starts at 0 and reaches at least the largest value.
		yt := texts["ytick"]
		if len(yt) < 2 || yt[0] != "0" {
			t.Errorf("panel %q: y ticks %q, want 0 first", p.title, yt)
		}
		for j, s := range p.series {
			if lines[j].attrs["data-series"] != s.name {
				t.Errorf("panel %q: polyline %d is %q, want %q", p.title, j, lines[j].attrs["data-series"], s.name)
			}
			var finitePts []plotPoint
			for _, pt := range s.points {
				if finite(pt.y) {
					finitePts = append(finitePts, pt)
				}
			}
			got := polylinePoints(t, lines[j])
			if len(got) != len(finitePts) {
				t.Errorf("panel %q, %q: %d points, want %d", p.title, s.name, len(got), len(finitePts))
				continue
			}
			for k := 1; k < len(got); k++ {
				// Larger N to the right; a larger value higher up (smaller y), equal values level.
				if got[k][0] <= got[k-1][0] {
					t.Errorf("panel %q, %q: x does not grow with N: %v", p.title, s.name, got)
				}
				dy, dv := got[k][1]-got[k-1][1], finitePts[k].y-finitePts[k-1].y
				switch {
				case dv == 0 && math.Abs(dy) > 0.05:
					t.Errorf("panel %q, %q: equal values at different heights: %v", p.title, s.name, got)
				case dv > 0 && dy >= 0, dv < 0 && dy <= 0:
					t.Errorf("panel %q, %q: heights %v do not follow values %v", p.title, s.name, got, finitePts)
				}
			}
		}
	}
	// The axes line up: a size is at the same x in every panel's column.
	xAt := map[string]map[float64]bool{}
	for _, e := range els {
		if e.name == "text" && e.attrs["class"] == "xtick" {
			x, _ := strconv.ParseFloat(e.attrs["x"], 64)
			if xAt[e.text] == nil {
				xAt[e.text] = map[float64]bool{}
			}
			xAt[e.text][math.Round(10*math.Mod(x, plotPanelWidth))/10] = true
		}
	}
	for label, at := range xAt {
		if len(at) != 1 {
			t.Errorf("N = %s at different places in different panels: %v", label, at)
		}
	}
	// Series keep their colour from panel to panel.
	colors := map[string]string{}
	for _, e := range els {
		if e.name != "polyline" {
			continue
		}
		name, c := e.attrs["data-series"], e.attrs["stroke"]
		if prev, ok := colors[name]; ok && prev != c {
			t.Errorf("series %q drawn in %s and %s", name, prev, c)
		}
		colors[name] = c
	}
	if colors["probes off"] == colors["probes on (service)"] {
		t.Errorf("two series share the colour %s", colors["probes off"])
	}
}

func TestWriteCostCurveNoPanels(t *testing.T) {
	if err := writeCostCurve(io.Discard, "x", nil); err == nil {
		t.Fatal("no error for a plot without panels")
	}
}

func TestNiceTicks(t *testing.T) {
	for _, c := range []struct {
		max  float64
		want string
	}{
		{0, "0 1"},
		{math.NaN(), "0 1"},
		{2, "0 0.5 1 1.5 2"},
		{3, "0 1 2 3"},
		{7.3, "0 2 4 6 8"},
		{0.042, "0 0.02 0.04 0.06"},
		{1000, "0 250 500 750 1,000"},
	} {
		var got []string
		for _, v := range niceTicks(c.max) {
			got = append(got, tickLabel(v))
		}
		if strings.Join(got, " ") != c.want {
			t.Errorf("niceTicks(%v) = %q, want %q", c.max, strings.Join(got, " "), c.want)
		}
	}
}
