package main

import (
	"fmt"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plot draws the median propagation time against N, log y: implicit (the
// slower of the last namespace watcher and the -A watcher) for each G, the
// native watch cache's fan-out of the same edits for each G, and the copy
// way unthrottled and at QPS 50.
func (r *results) plot(path string) error {
	p := plot.New()
	p.Title.Text = "One global RoleBinding edit until every watcher has it"
	p.X.Label.Text = "tenant namespaces N"
	p.Y.Label.Text = "time to the last watcher (s, median, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0.01, 1000
	var ticks []plot.Tick
	for _, n := range r.Ns {
		ticks = append(ticks, plot.Tick{Value: float64(n.N), Label: fmt.Sprint(n.N)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(10), vg.Points(-5)
	p.Add(plotter.NewGrid())

	type line struct {
		name  string
		pts   plotter.XYs
		color color.Color
		dash  []vg.Length
		shape draw.GlyphDrawer
	}
	var lines []*line
	colors := []color.Color{color.RGBA{0, 114, 178, 255}, color.RGBA{86, 180, 233, 255}, color.RGBA{0, 158, 115, 255}}
	if len(r.Ns) > 0 {
		for gi, g := range r.Ns[0].G {
			l := &line{name: fmt.Sprintf("implicit views, G=%d", g.G), color: colors[gi%len(colors)], shape: draw.CircleGlyph{}}
			for _, n := range r.Ns {
				if gi < len(n.G) {
					l.pts = append(l.pts, plotter.XY{X: float64(n.N), Y: max(n.G[gi].Implicit.median(), n.G[gi].ImplicitAll.median()).Seconds()})
				}
			}
			lines = append(lines, l)
		}
		for gi, g := range r.Ns[0].G {
			l := &line{name: fmt.Sprintf("native watch cache, same edit, G=%d", g.G), color: colors[gi%len(colors)], dash: []vg.Length{vg.Points(1), vg.Points(3)}, shape: draw.PyramidGlyph{}}
			for _, n := range r.Ns {
				if gi < len(n.G) && len(n.G[gi].Native) > 0 {
					l.pts = append(l.pts, plotter.XY{X: float64(n.N), Y: n.G[gi].Native.median().Seconds()})
				}
			}
			lines = append(lines, l)
		}
	}
	// The fleets alone (issue 32), at the last G of each N.
	alone := []struct {
		kind, name string
		color      color.Color
		shape      draw.GlyphDrawer
	}{
		{fleetViews, "implicit views alone (N watchers, last G)", color.RGBA{204, 121, 167, 255}, draw.CircleGlyph{}},
		{fleetNative, "native watch cache alone", color.RGBA{204, 121, 167, 255}, draw.PyramidGlyph{}},
		{fleetReference, "sample-apiserver alone (aggregated reference)", color.RGBA{120, 120, 120, 255}, draw.BoxGlyph{}},
	}
	for i, a := range alone {
		l := &line{name: a.name, color: a.color, shape: a.shape}
		if i > 0 {
			l.dash = []vg.Length{vg.Points(1), vg.Points(3)}
		}
		for _, n := range r.Ns {
			if n.Alone != nil && len(n.Alone.Rounds[a.kind]) > 0 {
				l.pts = append(l.pts, plotter.XY{X: float64(n.N), Y: n.Alone.Rounds[a.kind].median().Seconds()})
			}
		}
		lines = append(lines, l)
	}
	unthrottled := &line{name: fmt.Sprintf("copies, unthrottled (%d workers)", copyWorkers), color: color.RGBA{230, 159, 0, 255}, dash: []vg.Length{vg.Points(4), vg.Points(2)}, shape: draw.SquareGlyph{}}
	qps50 := &line{name: "copies at QPS 50 (HNC default)", color: color.RGBA{213, 94, 0, 255}, dash: []vg.Length{vg.Points(2), vg.Points(2)}, shape: draw.TriangleGlyph{}}
	for _, n := range r.Ns {
		if len(n.Copy.Unthrottled) > 0 {
			unthrottled.pts = append(unthrottled.pts, plotter.XY{X: float64(n.N), Y: n.Copy.Unthrottled.median().Seconds()})
		}
		if len(n.Copy.QPS50) > 0 {
			qps50.pts = append(qps50.pts, plotter.XY{X: float64(n.N), Y: n.Copy.QPS50.median().Seconds()})
		}
	}
	lines = append(lines, unthrottled, qps50)
	for _, l := range lines {
		for _, pt := range l.pts {
			if pt.Y > 0 && pt.Y < p.Y.Min {
				p.Y.Min = 0.001 // a native fan-out at small N
			}
		}
	}
	for _, l := range lines {
		if len(l.pts) == 0 {
			continue
		}
		lp, sp, err := plotter.NewLinePoints(l.pts)
		if err != nil {
			return err
		}
		lp.Color, lp.Width, lp.Dashes = l.color, vg.Points(1.5), l.dash
		sp.Color, sp.Shape, sp.Radius = l.color, l.shape, vg.Points(3)
		p.Add(lp, sp)
		p.Legend.Add(l.name, lp, sp)
	}
	return p.Save(8*vg.Inch, 5*vg.Inch, path)
}

// opensPath is the plot of the fleets' opening times beside path.
func opensPath(path string) string { return strings.TrimSuffix(path, ".png") + "-opens.png" }

// plotOpens draws the median time to open each fleet alone (N watchers,
// each a list then a watch) against N, log y, when any N measured it.
func (r *results) plotOpens(path string) error {
	p := plot.New()
	p.Title.Text = "Opening N watchers (each a list, then a watch), each fleet alone"
	p.X.Label.Text = "watchers N (one per tenant namespace for the views)"
	p.Y.Label.Text = "time to open the fleet (s, median, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min, p.Y.Max = 0.1, 1000
	var ticks []plot.Tick
	for _, n := range r.Ns {
		ticks = append(ticks, plot.Tick{Value: float64(n.N), Label: fmt.Sprint(n.N)})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	drawn := false
	for _, f := range []struct {
		kind, name string
		color      color.Color
		shape      draw.GlyphDrawer
		dash       []vg.Length
	}{
		{fleetViews, "implicit views", color.RGBA{0, 114, 178, 255}, draw.CircleGlyph{}, nil},
		{fleetNative, "native watch cache", color.RGBA{0, 114, 178, 255}, draw.PyramidGlyph{}, []vg.Length{vg.Points(1), vg.Points(3)}},
		{fleetReference, "sample-apiserver (aggregated reference)", color.RGBA{120, 120, 120, 255}, draw.BoxGlyph{}, []vg.Length{vg.Points(4), vg.Points(2)}},
	} {
		var pts plotter.XYs
		for _, n := range r.Ns {
			if n.Alone != nil && len(n.Alone.Open[f.kind]) > 0 {
				pts = append(pts, plotter.XY{X: float64(n.N), Y: n.Alone.Open[f.kind].median().Seconds()})
			}
		}
		if len(pts) == 0 {
			continue
		}
		for _, pt := range pts {
			if pt.Y < p.Y.Min {
				p.Y.Min = 0.01
			}
		}
		lp, sp, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		lp.Color, lp.Width, lp.Dashes = f.color, vg.Points(1.5), f.dash
		sp.Color, sp.Shape, sp.Radius = f.color, f.shape, vg.Points(3)
		p.Add(lp, sp)
		p.Legend.Add(f.name, lp, sp)
		drawn = true
	}
	if !drawn {
		return nil
	}
	return p.Save(8*vg.Inch, 4*vg.Inch, path)
}
