package main

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"
)

func TestQuantityString(t *testing.T) {
	for _, tc := range []struct {
		q    Quantity
		want string
	}{
		{rate(86), "86/s"},
		{rate(97195), "97.2 k/s"},
		{pps(2901), "2901 pps"},
		{pps(278410), "278.4 kpps"},
		{pps(1.5e6), "1.50 Mpps"},
		{bitsPerSecond(10.95e9), "10.95 Gbit/s"},
		{duration(20 * time.Millisecond), "20.00 ms"},
		{duration(152 * time.Microsecond), "152 µs"},
		{duration(9060 * time.Millisecond), "9.06 s"},
		{bytesQ(231 << 20), "231 MiB"},
		{bytesQ(1536 << 10), "1536 KiB"},
	} {
		if got := tc.q.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.q, got, tc.want)
		}
	}
}

func TestVerdict(t *testing.T) {
	for _, tc := range []struct {
		name  string
		row   Row
		ratio float64
		want  string
	}{
		{"throughput above the ratio", Row{Figure: rate(90), Baseline: rate(100), Target: ratioAtLeast(0.8)}, 0.9, "yes"},
		{"throughput below the ratio", Row{Figure: rate(70), Baseline: rate(100), Target: ratioAtLeast(0.8)}, 0.7, "NO"},
		{"time within the ratio", Row{Figure: duration(11 * time.Millisecond), Baseline: duration(10 * time.Millisecond), Target: ratioAtMost(1.2)}, 1.1, "yes"},
		{"time beyond the ratio", Row{Figure: duration(13 * time.Millisecond), Baseline: duration(10 * time.Millisecond), Target: ratioAtMost(1.2)}, 1.3, "NO"},
		{"absolute budget kept, whatever the baseline", Row{Figure: duration(900 * time.Millisecond), Baseline: duration(100 * time.Millisecond), Target: below(duration(time.Second))}, 9, "yes"},
		{"absolute budget missed", Row{Figure: duration(2 * time.Second), Baseline: duration(3 * time.Second), Target: below(duration(time.Second))}, 2.0 / 3, "NO"},
		{"informational", Row{Figure: rate(5), Baseline: rate(10)}, 0.5, "—"},
		{"failed", Row{Err: "boom", Target: ratioAtLeast(1)}, math.NaN(), "error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.row.Verdict(); got != tc.want {
				t.Errorf("Verdict = %q, want %q", got, tc.want)
			}
			got := tc.row.Ratio()
			if math.IsNaN(tc.ratio) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.ratio) > 1e-9) {
				t.Errorf("Ratio = %v, want %v", got, tc.ratio)
			}
		})
	}
}

func TestPrintTable(t *testing.T) {
	rows := []Row{
		{ID: "1a", What: "allocation", Figure: rate(86), Baseline: rate(185), BaselineWhat: "API-write floor", Target: ratioAtLeast(0.8), Note: "how it was measured"},
		{ID: "2", What: "attach", Err: "needs root\nsecond line"},
		{ID: "3", What: "no baseline", Figure: pps(1000)},
	}
	var text bytes.Buffer
	printTable(&text, rows)
	out := text.String()
	for _, want := range []string{
		"#   benchmark", "1a  allocation", "86/s", "185/s (API-write floor)", "0.46", "≥ 0.8×", "NO",
		"failed: needs root second line", "error",
		"- 1a: how it was measured", "- 2: failed: needs root\nsecond line",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text table lacks %q:\n%s", want, out)
		}
	}
	var md bytes.Buffer
	printMarkdown(&md, []Row{{ID: "3a", What: "a | b", Figure: pps(10), Baseline: pps(20), Target: ratioAtLeast(0.9)}})
	lines := strings.Split(md.String(), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[1], "|---|") {
		t.Fatalf("markdown:\n%s", md.String())
	}
	if want := `| 3a | a \| b | 10 pps | 20 pps | 0.50 | ≥ 0.9× | NO |`; lines[2] != want {
		t.Errorf("markdown row %q, want %q", lines[2], want)
	}
}

func TestSelectBenchmarks(t *testing.T) {
	all, err := selectBenchmarks("")
	if err != nil || len(all) != 9 { // 1, 1e, 1f, 2 to 7
		t.Fatalf("all: %d benchmarks, %v", len(all), err)
	}
	some, err := selectBenchmarks("arp, 1")
	if err != nil || len(some) != 2 || some[0].name != "arp" || some[1].name != "allocation" {
		t.Fatalf("arp,1: %+v, %v", some, err)
	}
	if _, err := selectBenchmarks("nope"); err == nil {
		t.Error("an unknown benchmark was accepted")
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 10000: "10,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestPairedRatio(t *testing.T) {
	// Load that changes from round to round moves both configurations alike:
	// per-round ratios 1.0, 1.05, 0.91, while the medians' ratio is 1.05.
	juneau := []float64{100, 200, 300}
	floor := []float64{100, 190, 330}
	if got := pairedRatio(juneau, floor); got != 1 {
		t.Errorf("pairedRatio = %v, want the median of the per-round ratios, 1", got)
	}
	r := Row{Figure: pps(200), Baseline: pps(190), PairedRatio: 0.5, Target: ratioAtLeast(0.97)}
	if r.Ratio() != 0.5 || r.Verdict() != "NO" {
		t.Errorf("row with a paired ratio: ratio %v, verdict %s", r.Ratio(), r.Verdict())
	}
}
