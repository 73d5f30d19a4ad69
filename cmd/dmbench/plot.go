package main

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/dmindex/dmindex/ycsb"
)

// Plot sizes: one panel, and the height of a row of panels.
const (
	panelW = 4 * vg.Inch
	panelH = 3.2 * vg.Inch
)

// plotCurves draws the throughput–p99 latency curve of every index on each
// workload (one point per client count, as in the paper's Figures 4.10 and
// 4.11): curve-<workload>.{png,svg} per workload and curves.{png,svg} with
// all of them side by side.
func plotCurves(dir string, results []*ycsb.Result, idx []string, ws []ycsb.Workload) error {
	var panels []*plot.Plot
	for _, w := range ws {
		p := plot.New()
		p.Title.Text = "YCSB " + strings.ToUpper(w.Name)
		p.X.Label.Text = "throughput (Mops/s)"
		p.Y.Label.Text = "p99 latency (µs)"
		p.X.Min = 0
		p.Add(plotter.NewGrid())
		lo, hi := math.Inf(1), 0.0
		for i, name := range idx {
			var pts plotter.XYs
			for _, r := range results {
				if r.Index == name && r.Workload == w.Name && r.Completed > 0 {
					pts = append(pts, plotter.XY{X: r.ThroughputOps / 1e6, Y: r.P99US})
					lo, hi = min(lo, r.P99US), max(hi, r.P99US)
				}
			}
			if len(pts) == 0 {
				continue
			}
			l, s, err := plotter.NewLinePoints(pts)
			if err != nil {
				return err
			}
			l.Color, s.Color, s.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
			l.Width = vg.Points(1.5)
			p.Add(l, s)
			p.Legend.Add(name, l, s)
		}
		if lo > 0 && hi/lo > 20 {
			p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
			p.Y.Max = hi * 3 // room for the legend
		} else {
			p.Y.Min, p.Y.Max = 0, hi*1.3
			p.Y.Tick.Marker = ticks
		}
		p.X.Tick.Marker = ticks
		p.Legend.Top, p.Legend.Left = true, true
		if err := save(dir, "curve-"+w.Name, panelW, panelH, p); err != nil {
			return err
		}
		panels = append(panels, p)
	}
	if len(panels) < 2 {
		return nil
	}
	return save(dir, "curves", panelW*vg.Length(len(panels)), panelH, panels...)
}

// plotRatios draws the measured peak-throughput ratios per workload as
// bars, next to the paper's where it states them: ratios.{png,svg}.
func plotRatios(dir string, ratios []ratio) error {
	p := plot.New()
	num, den := ratios[0].Numerator, ratios[0].Denominator
	p.Title.Text = fmt.Sprintf("peak throughput %s / %s", num, den)
	p.Y.Label.Text = "ratio"
	p.Y.Min = 0
	var measured, paper plotter.Values
	var labels []string
	hasPaper := false
	for _, r := range ratios {
		if r.Numerator != num || r.Denominator != den {
			continue
		}
		labels = append(labels, strings.ToUpper(r.Workload))
		measured = append(measured, r.Ratio)
		v := 0.0
		if r.Paper != nil {
			v, hasPaper = *r.Paper, true
		}
		paper = append(paper, v)
	}
	width := vg.Points(18)
	bm, err := plotter.NewBarChart(measured, width)
	if err != nil {
		return err
	}
	bm.Color, bm.LineStyle.Width = plotutil.Color(0), 0
	p.Add(bm)
	p.Legend.Add("measured", bm)
	if hasPaper {
		bp, err := plotter.NewBarChart(paper, width)
		if err != nil {
			return err
		}
		bp.Color, bp.LineStyle.Width = color.Gray{Y: 170}, 0
		bm.Offset, bp.Offset = -width/2, width/2
		p.Add(bp)
		p.Legend.Add("paper (Fig. 4.10)", bp)
	}
	one := plotter.NewFunction(func(float64) float64 { return 1 })
	one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	one.Color = color.Gray{Y: 90}
	p.Add(one)
	var xys plotter.XYLabels
	for i, v := range measured {
		xys.XYs = append(xys.XYs, plotter.XY{X: float64(i), Y: v})
		xys.Labels = append(xys.Labels, fmt.Sprintf("%.2f×", v))
	}
	lab, err := plotter.NewLabels(xys)
	if err != nil {
		return err
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign, lab.TextStyle[i].YAlign = draw.XCenter, draw.YBottom
	}
	if hasPaper {
		lab.Offset.X = -width / 2
	}
	p.Add(lab)
	p.NominalX(labels...)
	p.Y.Tick.Marker = ticks
	p.Y.Max = 1.3 * max(slices.Max(measured), slices.Max(paper), 1)
	p.Legend.Top = true
	return save(dir, "ratios", max(panelW, vg.Length(len(labels))*1.2*vg.Inch), panelH, p)
}

// groupedBars draws one group of bars per category (x) with one bar per
// series, values[series][category].
func groupedBars(title, ylabel string, categories, series []string, values [][]float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.Y.Label.Text = ylabel
	p.Y.Min = 0
	width := vg.Points(10)
	for s, name := range series {
		b, err := plotter.NewBarChart(plotter.Values(values[s]), width)
		if err != nil {
			return nil, err
		}
		b.Color, b.LineStyle.Width = plotutil.Color(s), 0
		b.Offset = width * (vg.Length(s) - vg.Length(len(series)-1)/2)
		p.Add(b)
		p.Legend.Add(name, b)
	}
	p.NominalX(categories...)
	p.Y.Tick.Marker = ticks
	var top float64
	for _, v := range values {
		top = max(top, slices.Max(v))
	}
	p.Y.Max = top * (1.2 + 0.08*float64(len(series))) // room for the legend
	p.Legend.Top = true
	return p, nil
}

// ticks are gonum's default tick positions with labels in %g, so that
// round values print as "25", not "25.00".
var ticks = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	t := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range t {
		if t[i].Label != "" {
			t[i].Label = strconv.FormatFloat(t[i].Value, 'g', 4, 64)
		}
	}
	return t
})

// save writes the plots side by side as name.png and name.svg in dir.
func save(dir, name string, w, h vg.Length, plots ...*plot.Plot) error {
	for _, format := range []string{"png", "svg"} {
		c, err := draw.NewFormattedCanvas(w, h, format)
		if err != nil {
			return err
		}
		tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
			PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2}
		canvases := plot.Align([][]*plot.Plot{plots}, tiles, draw.New(c))
		for i, p := range plots {
			p.Draw(canvases[0][i])
		}
		f, err := os.Create(filepath.Join(dir, name+"."+format))
		if err != nil {
			return err
		}
		if _, err := c.WriteTo(f); err != nil {
			f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
