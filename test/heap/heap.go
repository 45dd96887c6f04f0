// Package heap measures, in tests, what the objects a function keeps cost the Go heap,
// and whether a string is the one shared copy of its value: the memory tests of the
// caches' transforms (docs/performance.md#scale).
package heap

import (
	"runtime"
	"runtime/metrics"
	"unique"
	"unsafe"
)

// PerObject is the live heap per input of what keep returns for each input: keep is
// called once per input between two readings of the live heap, and what it returns is
// kept alive across the second. The inputs are alive at both readings, so counted in
// neither.
func PerObject[In any](inputs []In, keep func(In) any) int64 {
	kept := make([]any, len(inputs))
	before := Live()
	for i, in := range inputs {
		kept[i] = keep(in)
	}
	after := Live()
	runtime.KeepAlive(kept)
	runtime.KeepAlive(inputs)
	return (after - before) / int64(max(len(inputs), 1))
}

// Live is the heap's live bytes after a collection.
func Live() int64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// Interned says s is the one copy unique keeps of its value (cached.Lean interns so):
// unique.Make copies a value it does not hold yet, so any other copy compares unequal.
func Interned(s string) bool {
	return unsafe.StringData(s) == unsafe.StringData(unique.Make(s).Value())
}
