package messages

import "testing"

func TestList(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"b"}, `"b"`},
		{[]string{"b", "a", "b"}, `"a", "b"`},
		{[]string{`we"ird`}, `"we\"ird"`},
		{[]string{"g", "f", "e", "d", "c", "b", "a"}, `"a", "b", "c", "d", "e" and 2 more`},
	} {
		if got := Names(tt.in); got != tt.want {
			t.Errorf("Names(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	in := []string{"b", "a"}
	Names(in)
	if in[0] != "b" {
		t.Error("List sorted its input")
	}
}

func TestKinds(t *testing.T) {
	for _, tt := range []struct {
		in   []string
		want string
	}{
		{[]string{"a"}, `AddressPool "a"`},
		{[]string{"a", "a"}, `AddressPool "a"`},
		{[]string{"b", "a"}, `AddressPools "a", "b"`},
	} {
		if got := Kinds("AddressPool", tt.in); got != tt.want {
			t.Errorf("Kinds(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
	if Verb(1, "does", "do") != "does" || Verb(2, "does", "do") != "do" || Plural(0, "Node") != "Nodes" {
		t.Error("Verb or Plural")
	}
}
