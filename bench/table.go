package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"
)

// Unit says how a Quantity is printed.
type Unit int

// Units of the figures.
const (
	PerSecond Unit = iota // operations per second
	Packets               // packets per second
	Bits                  // bits per second
	Seconds               // a duration, stored in seconds
	Bytes
	Count // a number of things
)

// Quantity is a measured value with its unit.
type Quantity struct {
	Value float64
	Unit  Unit
}

func rate(v float64) Quantity           { return Quantity{v, PerSecond} }
func pps(v float64) Quantity            { return Quantity{v, Packets} }
func bitsPerSecond(v float64) Quantity  { return Quantity{v, Bits} }
func duration(d time.Duration) Quantity { return Quantity{d.Seconds(), Seconds} }
func bytesQ(v float64) Quantity         { return Quantity{v, Bytes} }
func count(v float64) Quantity          { return Quantity{v, Count} }

func (q Quantity) String() string {
	v := q.Value
	switch q.Unit {
	case PerSecond:
		return scaled(v, "/s")
	case Packets:
		return scaled(v, "pps")
	case Bits:
		return scaled(v, "bit/s")
	case Seconds:
		return formatSeconds(v)
	case Count:
		return fmt.Sprintf("%.0f", v)
	case Bytes:
		if v < 10<<20 {
			return fmt.Sprintf("%.0f KiB", v/(1<<10))
		}
		return fmt.Sprintf("%.0f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%g", v)
}

func scaled(v float64, unit string) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f G%s", v/1e9, unit)
	case v >= 1e6:
		return fmt.Sprintf("%.2f M%s", v/1e6, unit)
	case v >= 1e4:
		return fmt.Sprintf("%.1f k%s", v/1e3, unit)
	}
	if strings.HasPrefix(unit, "/") {
		return fmt.Sprintf("%.0f%s", v, unit)
	}
	return fmt.Sprintf("%.0f %s", v, unit)
}

func formatSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.2f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.2f ms", s*1e3)
	}
	return fmt.Sprintf("%.0f µs", s*1e6)
}

// Target is what a row should achieve; a row without one is informational.
type Target struct {
	Text string
	met  func(figure, ratio float64) bool
}

// ratioAtLeast: figure/baseline ≥ x (throughputs).
func ratioAtLeast(x float64) Target {
	return Target{Text: fmt.Sprintf("≥ %g×", x), met: func(_, r float64) bool { return r >= x }}
}

// ratioAtMost: figure/baseline ≤ x (times that must not grow).
func ratioAtMost(x float64) Target {
	return Target{Text: fmt.Sprintf("≤ %g×", x), met: func(_, r float64) bool { return r <= x }}
}

// below: the figure itself stays under q (absolute budgets).
func below(q Quantity) Target {
	return Target{Text: "< " + q.String(), met: func(f, _ float64) bool { return f < q.Value }}
}

// Row is one line of the table: a figure, the baseline measured in the same run, their
// ratio, the target and whether it is met.
type Row struct {
	ID       string
	What     string
	Figure   Quantity
	Baseline Quantity
	// BaselineWhat names the baseline, e.g. "API-write floor".
	BaselineWhat string
	Target       Target
	// Note explains the figure: how it was measured, what bounds it.
	Note string
	// PairedRatio, when set, is the ratio instead of figure / baseline: the
	// median of ratios of runs measured back to back (the note says so).
	PairedRatio float64
	// Err is set when the benchmark behind the row failed.
	Err string
}

// Ratio is figure / baseline (or the paired ratio), NaN without a baseline.
func (r Row) Ratio() float64 {
	if r.Baseline.Value == 0 || r.Err != "" {
		return math.NaN()
	}
	if r.PairedRatio != 0 {
		return r.PairedRatio
	}
	return r.Figure.Value / r.Baseline.Value
}

// Verdict is "yes", "NO", "—" (no target) or "error".
func (r Row) Verdict() string {
	switch {
	case r.Err != "":
		return "error"
	case r.Target.met == nil:
		return "—"
	case r.Target.met(r.Figure.Value, r.Ratio()):
		return "yes"
	}
	return "NO"
}

func (r Row) cells() []string {
	if r.Err != "" {
		return []string{r.ID, r.What, "failed: " + oneLine(r.Err, 60), "", "", r.Target.Text, r.Verdict()}
	}
	base := ""
	if r.Baseline.Value != 0 {
		base = r.Baseline.String()
		if r.BaselineWhat != "" {
			base += " (" + r.BaselineWhat + ")"
		}
	}
	ratio := ""
	if x := r.Ratio(); !math.IsNaN(x) {
		ratio = fmt.Sprintf("%.2f", x)
	}
	target := r.Target.Text
	if target == "" {
		target = "—"
	}
	return []string{r.ID, r.What, r.Figure.String(), base, ratio, target, r.Verdict()}
}

var header = []string{"#", "benchmark", "figure", "baseline (same run)", "ratio", "target", "met"}

// printTable writes the rows as an aligned text table followed by the notes.
func printTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	_ = tw.Flush()
	printNotes(w, rows)
}

// printMarkdown writes the rows as a Markdown table followed by the notes.
func printMarkdown(w io.Writer, rows []Row) {
	fmt.Fprintf(w, "| %s |\n", strings.Join(header, " | "))
	fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(header)))
	for _, r := range rows {
		cells := r.cells()
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	printNotes(w, rows)
}

func printNotes(w io.Writer, rows []Row) {
	var notes []string
	for _, r := range rows {
		switch {
		case r.Err != "":
			notes = append(notes, fmt.Sprintf("%s: failed: %s", r.ID, r.Err))
		case r.Note != "":
			notes = append(notes, fmt.Sprintf("%s: %s", r.ID, r.Note))
		}
	}
	if len(notes) == 0 {
		return
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintf(w, "- %s\n", n)
	}
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// thousands writes n with comma separators: 10000 → "10,000".
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
