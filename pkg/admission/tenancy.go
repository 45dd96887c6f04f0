package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loutres/juneau/pkg/apis/juneau/annotations"
	"github.com/loutres/juneau/pkg/apis/juneau/tenancy"
	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// notAdmitted says why the network does not admit the namespace (tenancy.Refusal), or
// returns "" when it does. The namespace is read only for a network whose
// namespaceSelector restricts anything: from the cache, or from the API server when the
// cache does not show it yet (a namespace created a moment ago).
func (v *Validators) notAdmitted(ctx context.Context, net *v1alpha1.ExternalNetwork, namespace string) (string, error) {
	if tenancy.Open(net) {
		return "", nil
	}
	ns, err := v.r.namespace(ctx, namespace)
	if err != nil {
		return "", err
	}
	if ns == nil {
		// The API server admits no write into a namespace that does not exist; should
		// one reach us anyway, it is not judged on a guess.
		return "", fmt.Errorf("namespace %q does not exist", namespace)
	}
	return tenancy.Refusal(net, namespace, ns.Labels), nil
}

// checkAutoNetwork refuses a Pod asking for an automatic ElasticIP (pod-with-eip) in a
// namespace its network does not admit (docs/reference.md#tenancy): the network the Pod
// names in eip-external-network, or else the default network. It is checked when the
// Pod is created, and when an update starts asking or names another network; updates
// that leave both as they were are not refused, so a Pod in a namespace relabelled
// since can still be annotated. A network that does not exist (yet), or no single
// default, is left to the controller, which tells the Pod what it waits for.
func (v *Validators) checkAutoNetwork(ctx context.Context, pod, old *corev1.Pod) (field.ErrorList, error) {
	auto, _ := annotations.ParseAuto(pod.Annotations)
	if !auto.Enabled {
		return nil, nil
	}
	if old != nil {
		if was, errs := annotations.ParseAuto(old.Annotations); len(errs) == 0 && was.Enabled && was.ExternalNetwork == auto.ExternalNetwork {
			return nil, nil
		}
	}
	name := auto.ExternalNetwork
	path := field.NewPath("metadata", "annotations").Key(v1alpha1.AnnotationEIPExternalNetwork)
	advice := fmt.Sprintf("; name in %s a network that admits the namespace", v1alpha1.AnnotationEIPExternalNetwork)
	if name == "" {
		networks, err := v.r.allNetworks(ctx, false)
		if err != nil {
			return nil, err
		}
		defaults := annotations.DefaultNetworks(networks)
		if len(defaults) != 1 {
			return nil, nil
		}
		name = defaults[0]
		path = annotations.AutoPath(pod.Annotations, auto)
		advice = fmt.Sprintf("; it is the default network (annotated %s: \"true\") and the Pod names none in %s%s",
			v1alpha1.AnnotationDefaultNetwork, v1alpha1.AnnotationEIPExternalNetwork, advice)
	}
	net, err := v.r.network(ctx, name)
	if err != nil || net == nil || net.DeletionTimestamp != nil {
		return nil, err
	}
	refusal, err := v.notAdmitted(ctx, net, pod.Namespace)
	if err != nil || refusal == "" {
		return nil, err
	}
	return field.ErrorList{field.Forbidden(path, refusal+advice)}, nil
}
