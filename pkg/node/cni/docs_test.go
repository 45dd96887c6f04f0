package cni

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/holder"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

const repoRoot = "../../.."

var spaces = regexp.MustCompile(`\s+`)

// readPage returns a page of the repository with every run of white space made one
// space, so that a message wrapped over lines still matches.
func readPage(t *testing.T, page string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, page))
	if err != nil {
		t.Fatal(err)
	}
	return spaces.ReplaceAllString(string(data), " ")
}

// TestDocsQuoteTheWaitMessage: the error of a Pod whose interface waits for its
// ElasticIP, as the pages quote it in full, is what the plugin says. It is rendered from
// the functions that word each part: the NetworkInterface's Ready message
// (holder.WaitingFor), the agent's answer (cniserver.NotHeldMessage) and the plugin's
// error with the default waitSeconds.
func TestDocsQuoteTheWaitMessage(t *testing.T) {
	msg := waitExample()
	if !strings.Contains(msg, "within 10s") || !strings.Contains(msg, `used by NetworkInterface "web.eth0"`) {
		t.Fatalf("rendered %q; the test builds the wrong example", msg)
	}
	for _, page := range []string{"docs/guide-direct.md", "docs/troubleshooting.md", "pkg/node/cni/README.md"} {
		if !strings.Contains(readPage(t, page), msg) {
			t.Errorf("%s does not quote the plugin's message as it is:\n%s", page, msg)
		}
	}
}

// waitExample is the error of Pod default/web-2, whose eth0 waits for ElasticIP web-eip
// held by NetworkInterface web.eth0 of another Pod, with the default waitSeconds.
func waitExample() string {
	eip := &v1alpha1.ElasticIP{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-eip"},
		Status: v1alpha1.ElasticIPStatus{Phase: v1alpha1.ElasticIPAttached, Address: "10.225.51.6",
			Attachment: &v1alpha1.AttachmentReference{Kind: v1alpha1.AttachmentKindNetworkInterface, Name: "web.eth0", UID: "uid-web"}}}
	why := holder.WaitingFor(eip, holder.Ref(v1alpha1.AttachmentKindNetworkInterface, "web-2.eth0", "uid-web-2"))
	err := &notHeldError{pod: podRef{Namespace: "default", Name: "web-2"}, within: (&Config{}).Wait(),
		pending: []cniserver.Interface{{Interface: "eth0", ElasticIP: "web-eip", Waiting: cniserver.NotHeldMessage("web-2.eth0", "web-eip", why)}}}
	return err.Error()
}

// TestTroubleshootingQuotesRealMessages: every message of the CNI table of
// docs/troubleshooting.md, abridged with "..." or "…" and with names of the reader's
// own in quotes, is made of words the code says: each piece between the names and the
// ellipses is in the source of pkg/ as it stands. The full example is checked as
// rendered (TestDocsQuoteTheWaitMessage).
func TestTroubleshootingQuotesRealMessages(t *testing.T) {
	var source strings.Builder
	err := filepath.WalkDir(filepath.Join(repoRoot, "pkg"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		data, err := os.ReadFile(path)
		source.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	code := source.String()
	page := readPage(t, "docs/troubleshooting.md")
	_, table, ok := strings.Cut(page, "## Pod does not start: CNI ADD fails")
	if !ok {
		t.Fatal("docs/troubleshooting.md has no section \"Pod does not start: CNI ADD fails\"")
	}
	table, _, _ = strings.Cut(table, " ## ")
	quoted := regexp.MustCompile("\\| `([^`]+)`(?: / `([^`]+)`)? \\|")
	names := regexp.MustCompile(`"[^"]*"|\.\.\.|…`)
	rows := 0
	for _, m := range quoted.FindAllStringSubmatch(table, -1) {
		rows++
		for _, msg := range m[1:] {
			if msg == waitExample() {
				continue
			}
			for _, piece := range names.Split(msg, -1) {
				piece = strings.Trim(piece, " :")
				if len(piece) < 3 {
					continue
				}
				if !strings.Contains(code, piece) {
					t.Errorf("docs/troubleshooting.md quotes %q; the code never says %q", msg, piece)
				}
			}
		}
	}
	if rows < 5 {
		t.Errorf("found %d quoted messages in the CNI table of docs/troubleshooting.md", rows)
	}
}
