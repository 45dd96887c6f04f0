package podeip

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

func TestClassify(t *testing.T) {
	hostNet := func(p *corev1.Pod) { p.Spec.HostNetwork = true }
	tests := []struct {
		name        string
		pod         *corev1.Pod
		want        podState
		wantProblem string
	}{
		{name: "gone", want: podGone},
		{name: "asking", pod: newPod("p", withEIP("n")), want: podActive},
		{name: "asking by alias", pod: newPod("p", auto(v1alpha1.AliasPodWithEIP, "true")), want: podActive},
		{name: "naming an ElasticIP", pod: newPod("p", auto(v1alpha1.AnnotationPodEIPName, "e")), want: podActive},
		{name: "unscheduled still asks", pod: newPod("p", withEIP(""), func(p *corev1.Pod) { p.Spec.NodeName = "" }), want: podActive},
		{name: "not asking", pod: newPod("p", nil), want: podNotAsking},
		{name: "pod-with-eip false", pod: newPod("p", auto(v1alpha1.AnnotationPodWithEIP, "false")), want: podNotAsking},
		{name: "succeeded", pod: newPod("p", withEIP(""), phase(corev1.PodSucceeded)), want: podFinished},
		{name: "failed, even unreadable", pod: newPod("p", auto(v1alpha1.AnnotationPodWithEIP, "yes"), phase(corev1.PodFailed)), want: podFinished},
		{name: "terminating", pod: newPod("p", withEIP(""), terminating), want: podHolding},
		{name: "unreadable", pod: newPod("p", auto(v1alpha1.AnnotationPodWithEIP, "yes")), want: podHolding, wantProblem: v1alpha1.EventInvalidAnnotations},
		{name: "both ways on eth0", pod: newPod("p", withEIP("", v1alpha1.AnnotationElasticIP, "e")), want: podHolding, wantProblem: v1alpha1.EventInvalidAnnotations},
		{name: "host network", pod: newPod("p", withEIP(""), hostNet), want: podHolding, wantProblem: v1alpha1.EventHostNetwork},
		{name: "host network not asking", pod: newPod("p", nil, hostNet), want: podNotAsking},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, prob := classify(tt.pod)
			if got != tt.want {
				t.Errorf("state = %v, want %v", got, tt.want)
			}
			switch {
			case tt.wantProblem == "" && prob != nil:
				t.Errorf("unexpected problem %+v", prob)
			case tt.wantProblem != "" && (prob == nil || prob.Reason != tt.wantProblem || prob.Object != tt.pod):
				t.Errorf("problem = %+v, want %s on the Pod", prob, tt.wantProblem)
			}
		})
	}
	_, _, prob := classify(newPod("p", auto(v1alpha1.AnnotationPodWithEIP, "yes")))
	if !strings.Contains(prob.Message, v1alpha1.AnnotationPodWithEIP) {
		t.Errorf("message %q does not name the annotation", prob.Message)
	}
}

func TestChooseNetwork(t *testing.T) {
	deleting := func(n *v1alpha1.ExternalNetwork) *v1alpha1.ExternalNetwork {
		n.DeletionTimestamp = &metav1.Time{Time: t0}
		return n
	}
	notTrue := network("maybe", false)
	notTrue.Annotations = map[string]string{v1alpha1.AnnotationDefaultNetwork: "yes"}
	tests := []struct {
		name     string
		explicit string
		networks []*v1alpha1.ExternalNetwork
		want     string
		problem  string
	}{
		{name: "named", explicit: "a", networks: []*v1alpha1.ExternalNetwork{network("a", false), network("b", true)}, want: "a"},
		{name: "named missing", explicit: "c", networks: []*v1alpha1.ExternalNetwork{network("a", false)}, problem: v1alpha1.EventExternalNetworkNotFound},
		{name: "named deleting", explicit: "a", networks: []*v1alpha1.ExternalNetwork{deleting(network("a", false))}, problem: v1alpha1.EventExternalNetworkNotFound},
		{name: "default", networks: []*v1alpha1.ExternalNetwork{network("a", false), network("b", true)}, want: "b"},
		{name: "no networks", problem: v1alpha1.EventNoDefaultNetwork},
		{name: "no default", networks: []*v1alpha1.ExternalNetwork{network("a", false), notTrue}, problem: v1alpha1.EventNoDefaultNetwork},
		{name: "deleting default does not count", networks: []*v1alpha1.ExternalNetwork{deleting(network("a", true)), network("b", true)}, want: "b"},
		{name: "two defaults", networks: []*v1alpha1.ExternalNetwork{network("b", true), network("a", true)}, problem: v1alpha1.EventAmbiguousDefaultNetwork},
	}
	pod := newPod("p", nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, prob := chooseNetwork(pod, tt.explicit, tt.networks)
			if got != tt.want {
				t.Errorf("network = %q, want %q", got, tt.want)
			}
			if (prob == nil) != (tt.problem == "") || (prob != nil && prob.Reason != tt.problem) {
				t.Errorf("problem = %+v, want %q", prob, tt.problem)
			}
		})
	}
}
