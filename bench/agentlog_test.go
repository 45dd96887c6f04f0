package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestLogLinesSince: only the lines written after the offset count, each given as what
// follows the message.
func TestLogLinesSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	before := "I1208 01:39:54.214998 1 agent.go:310] \"Slow datapath sync\" node=\"n\" took=\"5s\" full=true failed=false\n"
	if err := os.WriteFile(path, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	from := logSize(path)
	after := before[:len(before)-len("took=\"5s\" full=true failed=false\n")] + "took=\"212ms\" full=true failed=false\n" +
		"I1208 01:39:55.000000 1 agent.go:200] \"Answering\" arp=1\n"
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(after); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := logLinesSince(path, from, "Slow datapath sync")
	if want := []string{`node="n" took="212ms" full=true failed=false`}; !slices.Equal(got, want) {
		t.Errorf("logLinesSince = %q, want %q", got, want)
	}
	if got := slowSyncsNote(nil); got != "none" {
		t.Errorf("slowSyncsNote(nil) = %q", got)
	}
}
