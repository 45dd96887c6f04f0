package annotations

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func networksOf(n int) string {
	entries := make([]string, n)
	for i := range entries {
		entries[i] = fmt.Sprintf(`{"interface":"e%d"}`, i)
	}
	return "[" + strings.Join(entries, ",") + "]"
}

// TestNetworksLimits: at most MaxNetworks extra NICs in at most MaxNetworksBytes; beyond
// either, one short error and no NIC at all.
func TestNetworksLimits(t *testing.T) {
	for _, tc := range []struct {
		name    string
		value   string
		nics    int
		errType field.ErrorType
	}{
		{"16 entries", networksOf(MaxNetworks), MaxNetworks, ""},
		{"17 entries", networksOf(MaxNetworks + 1), 0, field.ErrorTypeTooMany},
		{"5,000 entries (108 KB)", networksOf(5000), 0, field.ErrorTypeTooLong},
		{"166 KB of invalid JSON", "[" + strings.Repeat(`{"interface":"ext0",}`, 8000), 0, field.ErrorTypeTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nics, errs := ParseDirect(map[string]string{v1alpha1.AnnotationNetworks: tc.value})
			if len(nics) != tc.nics {
				t.Errorf("%d NICs, want %d", len(nics), tc.nics)
			}
			if tc.errType == "" {
				if len(errs) != 0 {
					t.Fatalf("errors: %v", errs)
				}
				return
			}
			if len(errs) != 1 || errs[0].Type != tc.errType || errs[0].Field != "metadata.annotations[juneau.loutres.me/networks]" {
				t.Fatalf("errors %v, want one %s on the networks annotation", errs, tc.errType)
			}
			if msg := messages.OfErrors(errs); len(msg) > 256 {
				t.Errorf("message of %d bytes: %q", len(msg), msg)
			}
		})
	}
}
