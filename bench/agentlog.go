package main

import (
	"os"
	"strings"
)

// logSize is the size of a process's log file now (0 if it cannot be read), where
// logLinesSince starts.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLinesSince returns what follows msg on each line of the log written after offset
// from that holds msg: a klog line's key/value pairs.
func logLinesSince(path string, from int64, msg string) []string {
	data, err := os.ReadFile(path)
	if err != nil || int64(len(data)) < from {
		return nil
	}
	var out []string
	for line := range strings.Lines(string(data[from:])) {
		if _, after, ok := strings.Cut(line, msg); ok {
			out = append(out, strings.TrimSpace(strings.TrimPrefix(after, `"`)))
		}
	}
	return out
}

// slowSyncsNote lists the slow syncs of a window for a row's note.
func slowSyncsNote(lines []string) string {
	if len(lines) == 0 {
		return "none"
	}
	return strings.Join(lines, "; ")
}
