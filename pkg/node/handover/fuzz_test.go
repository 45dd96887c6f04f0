package handover

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// FuzzLoadAnswering puts any bytes in the file where an agent saves the addresses it
// answered for (cut short by a crash, edited by hand, from an older agent) and loads it
// as the next agent does at start. Nothing panics and the file never fails the start;
// what loads is sorted, without duplicates, and only addresses the file names on a line
// of their own; saved again, it loads back to the same.
func FuzzLoadAnswering(f *testing.F) {
	f.Add([]byte("10.225.51.5\n10.225.51.6\nfd00:10:225:51::6\n"))
	f.Add([]byte("10.225.51.6\n10.225.51.5\n10.225.51.5\n"))
	f.Add([]byte("10.225.51.5\nnot an address\n  fe80::1%eth0  \r\n"))
	f.Add([]byte("10.225.51."))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, AnsweringFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoadAnswering(dir)
		if err != nil {
			t.Fatalf("a readable file fails the start: %v", err)
		}
		if !slices.IsSortedFunc(got, netip.Addr.Compare) || len(slices.Compact(slices.Clone(got))) != len(got) {
			t.Fatalf("loaded %v: not sorted or with duplicates", got)
		}
		for _, a := range got {
			if !a.IsValid() || !slices.ContainsFunc(lines(data), func(l string) bool { return l == a.String() }) {
				t.Fatalf("loaded %v, which no line of the file names", a)
			}
		}
		again := filepath.Join(dir, "again")
		if err := os.Mkdir(again, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := SaveAnswering(again, got); err != nil {
			t.Fatal(err)
		}
		back, err := LoadAnswering(again)
		if err != nil || !slices.Equal(got, back) {
			t.Fatalf("saved %v, loaded back %v (%v)", got, back, err)
		}
	})
}

// lines are the addresses the file's lines spell, in canonical form.
func lines(data []byte) []string {
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if a, err := netip.ParseAddr(strings.TrimSpace(l)); err == nil {
			out = append(out, a.String())
		}
	}
	return out
}
