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
