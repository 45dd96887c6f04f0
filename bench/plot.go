package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// plots collects the pictures of a run: distributions of the measured latencies (as
// cumulative distribution functions, the figure beside its baseline) and costs against
// scale. write renders them as SVG files into a directory (make bench:
// _output/bench-plots; docs/performance.md shows a run's).
type plots struct {
	cdfs   []cdfPlot
	scales []scalePlot
}

// dist is one named distribution.
type dist struct {
	name    string
	samples []time.Duration
}

type cdfPlot struct {
	file, title string
	lines       []dist
}

// point is one measurement at a size.
type point struct{ x, y float64 }

// points is one line of a cost against scale: for each step, its size and the cost get
// reads of it.
func points[T any](steps []T, size func(T) int, get func(T) float64) []point {
	ps := make([]point, 0, len(steps))
	for _, s := range steps {
		ps = append(ps, point{float64(size(s)), get(s)})
	}
	return ps
}

type scalePlot struct {
	file, title, xLabel, yLabel string
	logX                        bool
	lines                       map[string][]point
}

// cdf adds the distributions of the lines (each sorted here) as one picture.
func (p *plots) cdf(file, title string, lines ...dist) {
	if p == nil {
		return
	}
	p.cdfs = append(p.cdfs, cdfPlot{file: file, title: title, lines: lines})
}

// scale adds a cost against scale picture.
func (p *plots) scale(file, title, xLabel, yLabel string, logX bool, lines map[string][]point) {
	if p == nil {
		return
	}
	p.scales = append(p.scales, scalePlot{file: file, title: title, xLabel: xLabel, yLabel: yLabel, logX: logX, lines: lines})
}

// palette colours the lines: the figure first, the baseline second.
var palette = []color.Color{color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}}

// cdfPoints is the empirical distribution of samples, in milliseconds.
func cdfPoints(samples []time.Duration) plotter.XYs {
	s := slices.Clone(samples)
	slices.Sort(s)
	xy := make(plotter.XYs, len(s))
	for i, d := range s {
		xy[i].X = float64(d) / float64(time.Millisecond)
		xy[i].Y = float64(i+1) / float64(len(s))
	}
	return xy
}

// write renders every picture into dir and returns the files written.
func (p *plots) write(dir string) ([]string, error) {
	if p == nil || len(p.cdfs)+len(p.scales) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var files []string
	for _, c := range p.cdfs {
		pl := plot.New()
		pl.Title.Text = c.title
		// Latencies spread over decades (a median in microseconds, a tail in
		// milliseconds): a logarithmic axis shows both.
		pl.X.Label.Text = "milliseconds (logarithmic)"
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
		lo, hi := 0.0, 0.0
		pl.Y.Label.Text = "fraction of samples at or below"
		pl.Add(plotter.NewGrid())
		for i, l := range c.lines {
			if len(l.samples) == 0 {
				continue
			}
			xy := cdfPoints(l.samples)
			for i := range xy {
				xy[i].X = max(xy[i].X, 1e-3) // a log axis takes no 0
			}
			if lo == 0 || xy[0].X < lo {
				lo = xy[0].X
			}
			hi = max(hi, xy[len(xy)-1].X)
			line, err := plotter.NewLine(xy)
			if err != nil {
				return files, fmt.Errorf("%s: %w", c.file, err)
			}
			line.Color = palette[i%len(palette)]
			line.Width = vg.Points(1.5)
			pl.Add(line)
			pl.Legend.Add(fmt.Sprintf("%s (n=%d)", l.name, len(l.samples)), line)
		}
		if lo > 0 {
			pl.X.Min, pl.X.Max = lo/1.5, hi*1.5
		}
		legend(pl, true)
		f := filepath.Join(dir, c.file+".svg")
		if err := pl.Save(7*vg.Inch, 4*vg.Inch, f); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	for _, s := range p.scales {
		pl := plot.New()
		pl.Title.Text = s.title
		pl.X.Label.Text, pl.Y.Label.Text = s.xLabel, s.yLabel
		if s.logX {
			pl.X.Scale = plot.LogScale{}
			pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
		}
		pl.Add(plotter.NewGrid())
		names := make([]string, 0, len(s.lines))
		for n := range s.lines {
			names = append(names, n)
		}
		sort.Strings(names)
		for i, n := range names {
			pts := s.lines[n]
			xy := make(plotter.XYs, len(pts))
			for j, pt := range pts {
				xy[j].X, xy[j].Y = pt.x, pt.y
			}
			line, scatter, err := plotter.NewLinePoints(xy)
			if err != nil {
				return files, fmt.Errorf("%s: %w", s.file, err)
			}
			line.Color, scatter.Color = palette[i%len(palette)], palette[i%len(palette)]
			pl.Add(line, scatter)
			pl.Legend.Add(n, line, scatter)
		}
		if s.logX {
			// Room beside the first and last sizes for their tick labels.
			pl.X.Min, pl.X.Max = pl.X.Min/2, pl.X.Max*2
		}
		legend(pl, false)
		f := filepath.Join(dir, s.file+".svg")
		if err := pl.Save(7*vg.Inch, 4*vg.Inch, f); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// legend places the legend in the top left corner (CDFs: in the empty bottom right
// corner), in a smaller font, leaving room for fonts wider than the ones measured.
func legend(pl *plot.Plot, cdf bool) {
	pl.Legend.TextStyle.Font.Size = vg.Points(9)
	pl.Legend.Top, pl.Legend.Left = !cdf, !cdf
	pl.Legend.Padding = vg.Points(2)
	if cdf {
		pl.Legend.XOffs, pl.Legend.YOffs = -vg.Points(40), vg.Points(10)
	} else {
		pl.Legend.XOffs = vg.Points(10)
	}
}
