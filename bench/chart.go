package main

import (
	"fmt"
	"image/color"
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// chartLines are the systems drawn, with their legend names and colors.
var chartLines = []struct {
	sys, label string
	color      color.RGBA
	dashes     []vg.Length
}{
	{sysConvlog, "convlog Get (snapshot, chunk cache off)", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, nil},
	{sysConvlogWarm, "convlog Get (snapshot, chunk cache warm)", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, []vg.Length{vg.Points(1.5), vg.Points(2.5)}},
	{sysConvlogView, "convlog GetView (chunk cache warm)", color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, []vg.Length{vg.Points(1.5), vg.Points(2.5)}},
	{sysConvlogViewLocal, "convlog GetView (cache warm, in process)", color.RGBA{R: 0x17, G: 0xbe, B: 0xcf, A: 0xff}, []vg.Length{vg.Points(5), vg.Points(3)}},
	{sysConvlogViewTracked, "convlog GetView (cache warm, in process, heads tracked)", color.RGBA{R: 0x0b, G: 0x6e, B: 0x78, A: 0xff}, []vg.Length{vg.Points(1), vg.Points(1)}},
	{sysConvlogCons, "convlog Get (consistent)", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, []vg.Length{vg.Points(5), vg.Points(3)}},
	{sysRawKV, "raw JetStream KV get (one value)", color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}, nil},
	{sysPG, "PostgreSQL SELECT", color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, nil},
	{sysRedis, "Redis LRANGE", color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, nil},
}

// writeChart draws the median Get latency against thread length, log-log,
// one line per system, to path (PNG).
func writeChart(path string, res *Results) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("Get a whole thread: median latency (%s, %d cores, %s)", res.Mode, res.Machine.Cores, res.Machine.Date.Format("2006-01-02"))
	p.X.Label.Text = "thread length (messages of 512 bytes)"
	p.Y.Label.Text = "latency (ms)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker, p.Y.Tick.Marker = decades{}, decades{}
	p.Legend.Top, p.Legend.Left = true, true
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, l := range chartLines {
		var pts plotter.XYs
		for _, row := range res.Get.Rows {
			d := row.D[l.sys]
			if !d.Measured() {
				continue
			}
			ms := float64(d.P50) / 1e6
			pts = append(pts, plotter.XY{X: float64(row.N), Y: ms})
			lo, hi = min(lo, ms), max(hi, ms)
		}
		if len(pts) == 0 {
			continue
		}
		line, points, err := plotter.NewLinePoints(pts)
		if err != nil {
			return err
		}
		line.Color, line.Width, line.Dashes = l.color, vg.Points(2), l.dashes
		points.Color, points.Shape = l.color, shapes[i%len(shapes)]
		points.Radius = vg.Points(3.5)
		p.Add(line, points)
		p.Legend.Add(l.label, line, points)
	}
	if lo <= hi {
		p.Y.Min, p.Y.Max = math.Pow(10, math.Floor(math.Log10(lo))), math.Pow(10, math.Ceil(math.Log10(hi)))
	}
	first, last := float64(res.Get.Rows[0].N), float64(res.Get.Rows[len(res.Get.Rows)-1].N)
	p.X.Min, p.X.Max = first/1.5, last*1.5
	return p.Save(9*vg.Inch, 6*vg.Inch, path)
}

var shapes = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.RingGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}, draw.PyramidGlyph{}}

// decades marks every power of ten (labelled, e.g. "0.1", "1", "10",
// "1000") and the 2..9 multiples between them (unlabelled).
type decades struct{}

func (decades) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		base := math.Pow(10, e)
		for k := 1.0; k < 10; k++ {
			v := k * base
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			t := plot.Tick{Value: v}
			if k == 1 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			ts = append(ts, t)
		}
	}
	return ts
}
