package kubectlplugin

import "testing"

func TestWholeTrace(t *testing.T) {
	whole := "nat: 10.225.51.10 <-> 10.244.1.42 (map ...)\nlimit: none\narp: this Node's agent answers for 10.225.51.10\ncounter: x 1\n"
	for _, c := range []struct {
		name, out string
		want      bool
	}{
		{"whole", whole, true},
		{"whole IPv6", "nat: no mapping for fd00::1 in table juneau (0 mappings on this Node)\nlimit: none\nndp: this Node's agent does not answer for fd00::1\n", true},
		{"nothing", "", false},
		{"first line lost", "limit: none\narp: this Node's agent answers for 10.225.51.10\n", false},
		{"cut after the NAT line", "nat: 10.225.51.10 <-> 10.244.1.42 (map ...)\n", false},
		{"cut after the limit", "nat: 10.225.51.10 <-> 10.244.1.42 (map ...)\nlimit: none\n", false},
	} {
		if got := wholeTrace([]byte(c.out)); got != c.want {
			t.Errorf("%s: wholeTrace = %t, want %t", c.name, got, c.want)
		}
	}
}
