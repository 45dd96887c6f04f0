package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPlotsWrite(t *testing.T) {
	var p plots
	p.cdf("lat", "create → Available", dist{"controller", []time.Duration{3 * time.Millisecond, time.Millisecond, 2 * time.Millisecond}},
		dist{"floor", []time.Duration{time.Millisecond}}, dist{"empty", nil})
	p.scale("rate", "allocations per second against N", "ElasticIPs", "per second", true,
		map[string][]point{"controller": {{1000, 500}, {10000, 450}}, "floor": {{1000, 600}, {10000, 590}}})
	dir := t.TempDir()
	files, err := p.write(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 {
		t.Fatalf("files %v, want 2", files)
	}
	for _, want := range []struct{ file, text string }{{"lat.svg", "controller (n=3)"}, {"rate.svg", "allocations per second against N"}} {
		data, err := os.ReadFile(filepath.Join(dir, want.file))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(data), "<?xml") || !strings.Contains(string(data), "<svg") || !strings.Contains(string(data), want.text) {
			t.Errorf("%s is not an SVG showing %q:\n%.300s", want.file, want.text, data)
		}
	}
	if got := cdfPoints([]time.Duration{2 * time.Millisecond, time.Millisecond}); got[0].X != 1 || got[1].Y != 1 || got[0].Y != 0.5 {
		t.Errorf("cdf points %v", got)
	}
	var none *plots
	none.cdf("x", "y")
	if files, err := none.write(dir); files != nil || err != nil {
		t.Errorf("a nil plots writes nothing: %v %v", files, err)
	}
}

// Row 9's pictures: one per kind of cost, each with a point per size measured, the
// NDP run's files apart from the ARP run's.
func TestAgentPlots(t *testing.T) {
	runs := []agentRun{
		{n: 10000, change: []time.Duration{2 * time.Millisecond}, syncMean: time.Millisecond, full: 5 * time.Second, rss: 200 << 20, rssBefore: 210 << 20,
			arpJuneau: []time.Duration{10 * time.Microsecond}, arpKern: []time.Duration{12 * time.Microsecond}},
		{n: 100000, change: []time.Duration{9 * time.Millisecond}, syncMean: 4 * time.Millisecond, full: 40 * time.Second, rss: 1200 << 20, rssBefore: 1250 << 20,
			arpJuneau: []time.Duration{13 * time.Microsecond}, arpKern: []time.Duration{15 * time.Microsecond}},
	}
	var p plots
	agentPlots(&p, runs, false)
	agentPlots(&p, runs, true)
	files, err := p.write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 8 {
		t.Fatalf("files %v, want 4 for ARP and 4 for NDP", files)
	}
	for _, s := range p.scales {
		for name, line := range s.lines {
			if len(line) != len(runs) || line[1].x != 100000 || line[1].y <= 0 {
				t.Errorf("%s: line %q is %v, want a positive point per size", s.file, name, line)
			}
		}
	}
	if s := p.scales[4]; s.file != "agent-scale-change-ipv6" || !strings.Contains(s.title, "NDP") {
		t.Errorf("the NDP run's first picture is %s (%q)", s.file, s.title)
	}
}
