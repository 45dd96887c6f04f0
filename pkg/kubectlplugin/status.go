package kubectlplugin

import (
	"context"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// StatusRow is one ElasticIP of `kubectl juneau status`.
type StatusRow struct {
	Namespace, Name, Address string
	// User is the object using the address (kind/name), or "-".
	User string
	// Node is where the address is answered or announced, or "-".
	Node string
	// Wire says how the address reaches the segment: "ARP answering", "BGP announced",
	// or what is missing.
	Wire string
	// Attached is the Attached condition's status and reason.
	Attached string
}

// StatusRows builds the rows from the ElasticIPs and their advertisements (matched by
// the owner UID label), sorted by namespace and name.
func StatusRows(eips []v1alpha1.ElasticIP, arp []v1alpha1.ARPAdvertisement, bgp []v1alpha1.BGPAdvertisement) []StatusRow {
	arpOf := map[string]*v1alpha1.ARPAdvertisement{}
	for i := range arp {
		arpOf[arp[i].Labels[v1alpha1.LabelOwnerUID]] = &arp[i]
	}
	bgpOf := map[string]*v1alpha1.BGPAdvertisement{}
	for i := range bgp {
		bgpOf[bgp[i].Labels[v1alpha1.LabelOwnerUID]] = &bgp[i]
	}
	var rows []StatusRow
	for _, e := range eips {
		r := StatusRow{Namespace: e.Namespace, Name: e.Name, Address: dash(e.Status.Address), User: "-", Node: "-", Wire: "-", Attached: "-"}
		if a := e.Status.Attachment; a != nil {
			r.User = string(a.Kind) + "/" + a.Name
		}
		if c := meta.FindStatusCondition(e.Status.Conditions, v1alpha1.ConditionAttached); c != nil {
			r.Attached = string(c.Status) + " " + c.Reason
		}
		if ad := arpOf[string(e.UID)]; ad != nil {
			r.Node, r.Wire = ad.Spec.NodeName, wireState("ARP", "answering", meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnswering))
		}
		if ad := bgpOf[string(e.UID)]; ad != nil {
			r.Node, r.Wire = ad.Spec.NodeName, wireState("BGP", "announced", meta.FindStatusCondition(ad.Status.Conditions, v1alpha1.ConditionAnnounced))
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Namespace != rows[j].Namespace {
			return rows[i].Namespace < rows[j].Namespace
		}
		return rows[i].Name < rows[j].Name
	})
	return rows
}

func wireState(proto, yes string, c *metav1.Condition) string {
	switch {
	case c == nil:
		return proto + " pending"
	case c.Status == metav1.ConditionTrue:
		return proto + " " + yes
	}
	return proto + " " + c.Reason
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteStatus prints rows as a table.
func WriteStatus(w io.Writer, rows []StatusRow) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tADDRESS\tUSER\tNODE\tWIRE\tATTACHED")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Namespace, r.Name, r.Address, r.User, r.Node, r.Wire, r.Attached)
	}
	return tw.Flush()
}

// Status reads every ElasticIP of namespace ("" = all) and its advertisements.
func (c Clients) Status(ctx context.Context, namespace string) ([]StatusRow, error) {
	eips, err := c.Juneau.JuneauV1alpha1().ElasticIPs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	arp, err := c.Juneau.JuneauV1alpha1().ARPAdvertisements().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	bgp, err := c.Juneau.JuneauV1alpha1().BGPAdvertisements().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return StatusRows(eips.Items, arp.Items, bgp.Items), nil
}
