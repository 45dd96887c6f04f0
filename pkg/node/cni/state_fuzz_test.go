package cni

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// FuzzStateFile puts any bytes where the plugin keeps an attachment's state (a file a
// crash cut short, an older layout, a corrupted disk) and reads it as DEL, CHECK and
// GC do. Nothing panics; load either refuses the file with an error naming it or
// returns a state; GC's listing skips what does not decode instead of failing; a state
// that loads converts to the teardown plan and back without loss, and saved again
// loads back to itself.
func FuzzStateFile(f *testing.F) {
	f.Add([]byte(`{"network":"k8s","containerID":"abc","ifName":"eth0","namespace":"shop","pod":"web","uid":"9c0e","nics":[{"interface":"eth0","elasticIP":"web-eip","address":"10.225.51.6/32","primary":true,"hostInterface":"jnu1","replacedAddresses":["10.244.1.5/24"],"routes":[{"dst":"0.0.0.0/0","gw":"169.254.1.1","onLink":true}],"rules":[{"from":"10.225.51.6/32","table":100,"priority":1000}]}]}`))
	f.Add([]byte(`{"containerID":"abc","ifName":"eth0","nics":[{"interface":"ext0","address":"fd00:10:225:51::6/128","routes":[{"dst":"::/0","gw":"fe80::1%ext0","table":101}]}]}`))
	f.Add([]byte(`{"containerID":"abc","ifName":"eth0","nics":[{"address":"10.225.51.6/33"}]}`))
	f.Add([]byte(`{"containerID":"abc","ifN`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		store := stateStore{dir: dir}
		p, err := store.path("abc", "eth0")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := store.load("abc", "eth0")
		checkBounded(t, "load", err)
		listed, lerr := store.list()
		if lerr != nil {
			t.Fatalf("GC's listing fails on one bad file: %v", lerr)
		}
		if err != nil {
			if len(listed) != 0 {
				t.Fatalf("a file load refuses is listed for GC: %+v", listed[0])
			}
			return
		}
		if st == nil {
			t.Fatal("a file that exists loads as no state")
		}
		for _, n := range st.NICs {
			if back := n.plan().state(); !sameJSON(t, back, withoutReplaced(n)) {
				t.Fatalf("NIC state %+v becomes %+v through its plan", n, back)
			}
		}
		// Saved under its own names when they make a file name; loads back to itself.
		if _, err := store.path(st.ContainerID, st.IfName); err != nil {
			return
		}
		again := stateStore{dir: filepath.Join(dir, "again")}
		if err := again.save(st); err != nil {
			t.Fatalf("save a loaded state: %v", err)
		}
		back, err := again.load(st.ContainerID, st.IfName)
		if err != nil || !sameJSON(t, st, back) {
			t.Fatalf("state %+v saved and loaded is %+v (%v)", st, back, err)
		}
	})
}

// withoutReplaced is n without what the plan does not carry: the primary plugin's
// addresses, which DEL restores from the state itself.
func withoutReplaced(n nicState) nicState {
	n.ReplacedAddresses = nil
	return n
}

// sameJSON: a and b are written alike in a state file (an empty list is no list).
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(ja, jb)
}
