package admission

import (
	"context"
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/iprange"
	"github.com/loutres/juneau/pkg/apis/juneau/messages"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/apis/juneau/validation"
)

// elasticIPRules: the spec rules (immutable externalNetwork, ipFamily and requestedIP,
// requestedIP of the ElasticIP's family), the network exists and admits the ElasticIP's
// namespace, requestedIP lies in one of its pools and no other consumer reserved it;
// deletion is refused while an ElasticIPAttachment references the ElasticIP.
func (v *Validators) elasticIPRules() rules[*v1alpha1.ElasticIP] {
	return rules[*v1alpha1.ElasticIP]{
		create: func(ctx context.Context, e *v1alpha1.ElasticIP) (field.ErrorList, error) {
			if errs := validation.ValidateElasticIP(e); len(errs) > 0 {
				return errs, nil
			}
			return v.elasticIPReferences(ctx, e)
		},
		update: func(_ context.Context, e, old *v1alpha1.ElasticIP) (field.ErrorList, error) {
			// The references are immutable and were checked on create.
			return validation.ValidateElasticIPUpdate(e, old), nil
		},
		remove:    v.elasticIPReferrers,
		unchanged: func(e, old *v1alpha1.ElasticIP) bool { return equality.Semantic.DeepEqual(e.Spec, old.Spec) },
	}
}

// elasticIPReferences checks the network and requestedIP of a new ElasticIP.
func (v *Validators) elasticIPReferences(ctx context.Context, e *v1alpha1.ElasticIP) (field.ErrorList, error) {
	spec := field.NewPath("spec")
	name := e.Spec.ExternalNetwork
	net, err := v.r.network(ctx, name)
	switch {
	case err != nil:
		return nil, err
	case net == nil:
		return field.ErrorList{field.Invalid(spec.Child("externalNetwork"), name, fmt.Sprintf("ExternalNetwork %q does not exist", name))}, nil
	case net.DeletionTimestamp != nil:
		return field.ErrorList{field.Invalid(spec.Child("externalNetwork"), name, fmt.Sprintf("ExternalNetwork %q is being deleted", name))}, nil
	}
	// Tenancy first: a namespace the network does not admit learns nothing of its pools
	// and reservations.
	refusal, err := v.notAdmitted(ctx, net, e.Namespace)
	switch {
	case err != nil:
		return nil, err
	case refusal != "":
		return field.ErrorList{field.Forbidden(spec.Child("externalNetwork"), refusal)}, nil
	case e.Spec.RequestedIP == "":
		return nil, nil
	}
	path := spec.Child("requestedIP")
	ip := e.Spec.RequestedIP
	addr, err := iprange.ParseAddr(ip)
	if err != nil {
		return field.ErrorList{field.Invalid(path, ip, err.Error())}, nil
	}
	detail, err := v.outsideNetwork(ctx, net, addr)
	if err != nil {
		return nil, err
	}
	if detail != "" {
		return field.ErrorList{field.Invalid(path, ip, detail)}, nil
	}
	claim, err := v.r.claim(ctx, iprange.ClaimName(addr))
	if err != nil || claim == nil || claim.Spec.Consumer.UID == string(e.UID) {
		return nil, err
	}
	// The holder is named only to its own namespace: a tenant learns that an address
	// is taken, not who took it.
	c := claim.Spec.Consumer
	holder := fmt.Sprintf("%s %q", c.Kind, nsName(c.Namespace, c.Name))
	if c.Namespace != e.Namespace {
		holder = "an object of another namespace"
		if c.Kind != "" {
			holder = fmt.Sprintf("%s of another namespace", withArticle(c.Kind))
		}
	}
	return field.ErrorList{field.Invalid(path, ip, fmt.Sprintf(
		"is already reserved by %s (AllocationClaim %q)", holder, claim.Name))}, nil
}

// elasticIPReferrers says why an ElasticIP may not be deleted: the non-deleting
// ElasticIPAttachments that reference it.
func (v *Validators) elasticIPReferrers(ctx context.Context, e *v1alpha1.ElasticIP) (string, error) {
	// Both answers of the cache are confirmed by the API server: it may not have seen a
	// new attachment yet, nor one just deleted (kubectl deletes attachments and then
	// ElasticIPs within milliseconds: docs/operations.md#uninstalling).
	atts, err := v.r.attachmentsOf(ctx, e.Namespace, e.Name, false, true)
	refs := activeNames(atts)
	if err != nil || len(refs) == 0 {
		return "", err
	}
	return fmt.Sprintf("%s %s still %s it in spec.elasticIPRef.name; delete %s first",
		messages.Plural(len(refs), "ElasticIPAttachment"), messages.Names(refs), messages.Verb(len(refs), "references", "reference"), messages.Verb(len(refs), "it", "them")), nil
}

// activeNames are the names of the attachments not being deleted.
func activeNames(atts []*v1alpha1.ElasticIPAttachment) []string {
	var out []string
	for _, a := range atts {
		if a.DeletionTimestamp == nil {
			out = append(out, a.Name)
		}
	}
	return out
}

// outsideNetwork says why addr is not inside the pools the network may use
// (validation.PoolsOfNetwork), or "" when it is.
func (v *Validators) outsideNetwork(ctx context.Context, net *v1alpha1.ExternalNetwork, addr netip.Addr) (string, error) {
	pools := map[string]*v1alpha1.AddressPool{}
	for _, name := range net.Spec.AddressPools {
		pool, err := v.r.pool(ctx, name)
		if err != nil {
			return "", err
		}
		if pool != nil {
			pools[name] = pool
		}
	}
	networks, err := v.r.allNetworks(ctx, false)
	if err != nil {
		return "", err
	}
	verdict := validation.PoolsOfNetwork(net, func(name string) *v1alpha1.AddressPool { return pools[name] }, networks)
	var searched []string
	for _, pool := range verdict.Usable {
		searched = append(searched, pool.Name)
		if ranges, err := iprange.ParsePool(pool.Spec.Addresses); err == nil && iprange.Contain(ranges, addr) {
			return "", nil
		}
	}
	detail := fmt.Sprintf("is not inside the AddressPools of ExternalNetwork %q", net.Name)
	if len(searched) > 0 {
		detail += " (" + messages.Names(searched) + ")"
	}
	if missing := verdict.Missing; len(missing) > 0 {
		detail += fmt.Sprintf("; %s %s %s not exist", messages.Plural(len(missing), "AddressPool"), messages.Names(missing), messages.Verb(len(missing), "does", "do"))
	}
	for _, p := range verdict.WrongMode {
		detail += fmt.Sprintf("; AddressPool %q advertises by %s, not %s", p.Name, p.Spec.AdvertiseMode, net.Spec.Type)
	}
	for _, t := range verdict.Taken {
		detail += fmt.Sprintf("; AddressPool %q belongs to ExternalNetwork %q", t.Pool, t.Owner)
	}
	return detail, nil
}
