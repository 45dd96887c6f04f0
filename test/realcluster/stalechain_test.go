package realcluster

import "testing"

// TestStaleKubeProxyChain: only an empty Service, endpoint or external chain of
// kube-proxy's table is left out of the comparison; a chain with a rule, or another
// empty chain, stays. The input is laid out as nft lists a table (a blank line between
// two chains).
func TestStaleKubeProxyChain(t *testing.T) {
	in := "table ip kube-proxy {\n" +
		"\tchain service-ABC-juneau/juneau-webhook/tcp/https {\n\t}\n\n" +
		"\tchain endpoint-DEF-juneau/juneau-webhook/tcp/https__10.244.1.5/8443 {\n\t}\n\n" +
		"\tchain external-GHI-default/web/tcp/ {\n\t}\n\n" +
		"\tchain service-JKL-default/web/tcp/ {\n\t\tjump endpoint-MNO\n\t}\n\n" +
		"\tchain nat-prerouting {\n\t}\n" +
		"}\n"
	want := "table ip kube-proxy {\n" +
		"\tchain service-JKL-default/web/tcp/ {\n\t\tjump endpoint-MNO\n\t}\n\n" +
		"\tchain nat-prerouting {\n\t}\n" +
		"}\n"
	if got := staleKubeProxyChain.ReplaceAllString(in, ""); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
