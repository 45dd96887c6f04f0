package podeip

import (
	"maps"
	"runtime"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The book keeps, per address, each Pod written once with its latest UID, and forgets
// an address with its last Pod; carriers is a copy the caller may change.
func TestAddressBook(t *testing.T) {
	b := newAddressBook()
	b.wrote("10.0.0.1", "ns/a", "uid-1")
	b.wrote("10.0.0.1", "ns/a", "uid-2") // the Pod made again under the name
	b.wrote("10.0.0.1", "ns/b", "uid-3")
	b.wrote("10.0.0.2", "ns/c", "uid-4")
	got := b.carriers("10.0.0.1")
	if want := map[string]types.UID{"ns/a": "uid-2", "ns/b": "uid-3"}; !maps.Equal(got, want) {
		t.Fatalf("carriers %v, want %v", got, want)
	}
	got["ns/x"] = "changed"
	b.erased("10.0.0.1", "ns/a")
	if got, want := b.carriers("10.0.0.1"), map[string]types.UID{"ns/b": "uid-3"}; !maps.Equal(got, want) {
		t.Fatalf("after one erased: %v, want %v", got, want)
	}
	b.erased("10.0.0.1", "ns/b")
	b.erased("10.0.0.9", "ns/b") // never written
	if len(b.pods) != 1 || len(b.carriers("10.0.0.1")) != 0 {
		t.Fatalf("the address whose last Pod was erased is still held: %v", b.pods)
	}
}

// One address on one Pod, as nearly every address is, costs the book little beyond its
// strings: under 150 bytes of heap each over 20,000 (a map per address was ~380).
func TestAddressBookMemory(t *testing.T) {
	const n = 20000
	addrs, pods := make([]string, n), make([]string, n)
	for i := range n {
		addrs[i], pods[i] = "10.1."+strconv.Itoa(i>>8)+"."+strconv.Itoa(i&255), "ns/p"+strconv.Itoa(i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	b := newAddressBook()
	for i := range n {
		b.wrote(addrs[i], pods[i], "uid")
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes per address", per)
	if per > 150 {
		t.Errorf("the book holds %d bytes per address, want at most 150", per)
	}
	runtime.KeepAlive(b)
	runtime.KeepAlive(addrs) // live at both readings, so counted in neither
	runtime.KeepAlive(pods)
}
