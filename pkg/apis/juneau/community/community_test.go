package community

import (
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Community
		wantErr bool
	}{
		{in: "65000:100", want: Community{A: 65000, B: 100}},
		{in: "0:0", want: Community{}},
		{in: "65535:65535", want: Community{A: 65535, B: 65535}},
		{in: "65000:1:2", want: Community{Large: true, A: 65000, B: 1, C: 2}},
		{in: "4294967295:4294967295:4294967295", want: Community{Large: true, A: 1<<32 - 1, B: 1<<32 - 1, C: 1<<32 - 1}},
		{in: "65536:1", wantErr: true},
		{in: "1:65536", wantErr: true},
		{in: "4294967296:1:1", wantErr: true},
		{in: "065000:100", wantErr: true},
		{in: "65000", wantErr: true},
		{in: "1:2:3:4", wantErr: true},
		{in: "a:b", wantErr: true},
		{in: "1:-2", wantErr: true},
		{in: "1:+2", wantErr: true},
		{in: ":1", wantErr: true},
		{in: "", wantErr: true},
		{in: "no-export", wantErr: true},
	} {
		got, err := Parse(c.in)
		if (err != nil) != c.wantErr || got != c.want {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, error %v", c.in, got, err, c.want, c.wantErr)
		}
		if err == nil && got.String() != c.in {
			t.Errorf("Parse(%q).String() = %q", c.in, got.String())
		}
	}
}

func TestStandardAndOrder(t *testing.T) {
	if got := (Community{A: 65000, B: 100}).Standard(); got != 65000<<16|100 {
		t.Errorf("Standard() = %d", got)
	}
	list := []Community{{Large: true, A: 1, B: 2, C: 3}, {A: 2, B: 1}, {A: 1, B: 9}, {Large: true, A: 1, B: 2, C: 1}}
	slices.SortFunc(list, Compare)
	want := []Community{{A: 1, B: 9}, {A: 2, B: 1}, {Large: true, A: 1, B: 2, C: 1}, {Large: true, A: 1, B: 2, C: 3}}
	if !slices.Equal(list, want) {
		t.Errorf("sorted %v, want %v", list, want)
	}
}
