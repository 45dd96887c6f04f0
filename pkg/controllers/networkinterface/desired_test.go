package networkinterface

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

type podOpt func(*corev1.Pod)

func testPod(opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "pod-uid"},
		Spec:       corev1.PodSpec{NodeName: "node-a"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func annotated(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Annotations[kv[i]] = kv[i+1]
		}
	}
}

func labelled(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func deleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Unix(100, 0)} }

// nicsOf renders NICs as "name:eip:identity" for compact comparisons.
func nicsOf(nics []*v1alpha1.NetworkInterface) []string {
	var out []string
	for _, n := range nics {
		out = append(out, n.Name+":"+n.Spec.ElasticIP+":"+n.Spec.AllocationIdentity)
	}
	return out
}

func TestWantedNICs(t *testing.T) {
	tests := []struct {
		name       string
		pod        *corev1.Pod
		want       []string
		manage     bool
		problemsIn string // a field path every problem list must mention
	}{
		{name: "no Pod", pod: nil, manage: true},
		{name: "unscheduled", pod: testPod(func(p *corev1.Pod) { p.Spec.NodeName = "" }), manage: true},
		{name: "host network", pod: testPod(func(p *corev1.Pod) { p.Spec.HostNetwork = true }), manage: true},
		{name: "succeeded", pod: testPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), manage: true},
		{name: "failed and terminating", pod: testPod(deleting, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), manage: true},
		{name: "terminating keeps what it has", pod: testPod(deleting), manage: false},
		{name: "plain Pod gets eth0", pod: testPod(), want: []string{"web.eth0::"}, manage: true},
		{name: "pending Pod on a node gets eth0", pod: testPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }),
			want: []string{"web.eth0::"}, manage: true},
		{
			name:   "elastic-ip annotation on eth0",
			pod:    testPod(annotated(v1alpha1.AnnotationElasticIP, "web-eip")),
			want:   []string{"web.eth0:web-eip:"},
			manage: true,
		},
		{
			name: "networks entries, eth0 first then by interface",
			pod: testPod(annotated(v1alpha1.AnnotationNetworks,
				`[{"interface":"ext1"},{"interface":"ext0","elasticIP":"gw-eip"}]`)),
			want:   []string{"web.eth0::", "web.ext0:gw-eip:", "web.ext1::"},
			manage: true,
		},
		{
			name: "eth0 in the networks list",
			pod: testPod(annotated(v1alpha1.AnnotationNetworks,
				`[{"interface":"eth0","elasticIP":"a"},{"interface":"ext0","elasticIP":"b"}]`)),
			want:   []string{"web.eth0:a:", "web.ext0:b:"},
			manage: true,
		},
		{
			name:       "unreadable networks annotation",
			pod:        testPod(annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","bogus":1}]`)),
			problemsIn: "metadata.annotations[juneau.loutres.me/networks]",
		},
		{
			name: "elastic-ip and eth0 entry at once",
			pod: testPod(annotated(v1alpha1.AnnotationElasticIP, "a",
				v1alpha1.AnnotationNetworks, `[{"interface":"eth0","elasticIP":"b"}]`)),
			problemsIn: "metadata.annotations[juneau.loutres.me/networks]",
		},
		{
			name:       "NIC name too long",
			pod:        testPod(func(p *corev1.Pod) { p.Name = strings.Repeat("a", 250) }),
			problemsIn: "metadata.name",
		},
		{
			name:   "KubeVirt launcher with a VM label",
			pod:    testPod(labelled(v1alpha1.LabelKubeVirt, v1alpha1.LabelKubeVirtLauncher, v1alpha1.LabelKubeVirtVMName, "vm1")),
			want:   []string{"web.eth0::vmi.vm1"},
			manage: true,
		},
		{
			name: "KubeVirt launcher with the domain annotation only",
			pod: testPod(labelled(v1alpha1.LabelKubeVirt, v1alpha1.LabelKubeVirtLauncher),
				annotated(v1alpha1.AnnotationKubeVirtDomain, "vmi2")),
			want:   []string{"web.eth0::vmi.vmi2"},
			manage: true,
		},
		{
			name:   "VM label without the launcher label",
			pod:    testPod(labelled(v1alpha1.LabelKubeVirtVMName, "vm1")),
			want:   []string{"web.eth0::"},
			manage: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := wantedNICs(tt.pod)
			if diff := cmp.Diff(tt.want, nicsOf(w.NICs)); diff != "" {
				t.Errorf("NICs (-want +got):\n%s", diff)
			}
			if w.Manage != tt.manage {
				t.Errorf("Manage = %v, want %v", w.Manage, tt.manage)
			}
			if tt.problemsIn == "" && len(w.Problems) > 0 {
				t.Errorf("unexpected problems: %v", w.Problems)
			}
			if tt.problemsIn != "" {
				if len(w.Problems) == 0 {
					t.Fatalf("no problems, want some at %s", tt.problemsIn)
				}
				if msg := problemMessage(w.Problems); !strings.Contains(msg, tt.problemsIn) {
					t.Errorf("problem %q does not name %s", msg, tt.problemsIn)
				}
			}
		})
	}
}

func TestBuildNICSpecAndOwner(t *testing.T) {
	pod := testPod(annotated(v1alpha1.AnnotationElasticIP, "web-eip"))
	w := wantedNICs(pod)
	if len(w.NICs) != 1 {
		t.Fatalf("got %d NICs, want 1", len(w.NICs))
	}
	nic := w.NICs[0]
	wantSpec := v1alpha1.NetworkInterfaceSpec{
		PodRef:    v1alpha1.PodReference{Name: "web", UID: "pod-uid", Interface: "eth0"},
		NodeName:  "node-a",
		ElasticIP: "web-eip",
	}
	if diff := cmp.Diff(wantSpec, nic.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if nic.Namespace != "default" {
		t.Errorf("namespace %q", nic.Namespace)
	}
	wantRef := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "web", UID: "pod-uid", Controller: ptr.To(true)}
	if diff := cmp.Diff([]metav1.OwnerReference{wantRef}, nic.OwnerReferences); diff != "" {
		t.Errorf("ownerReferences (-want +got):\n%s", diff)
	}
}

// existingNIC is a NIC as the cache holds it.
func existingNIC(pod, iface, podUID, eip string, opts ...func(*v1alpha1.NetworkInterface)) *v1alpha1.NetworkInterface {
	n := &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{
			Name: v1alpha1.NetworkInterfaceName(pod, iface), Namespace: "default",
			UID: types.UID("nic-" + iface + "-" + podUID),
		},
		Spec: v1alpha1.NetworkInterfaceSpec{
			PodRef:    v1alpha1.PodReference{Name: pod, UID: podUID, Interface: iface},
			NodeName:  "node-a",
			ElasticIP: eip,
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func nicDeleting(n *v1alpha1.NetworkInterface) {
	n.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
}

func names(nics []*v1alpha1.NetworkInterface) []string {
	var out []string
	for _, n := range nics {
		out = append(out, n.Name+"@"+n.Spec.PodRef.UID)
	}
	return out
}

func TestPlanNICs(t *testing.T) {
	plain := testPod()
	direct := testPod(annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"gw-eip"}]`))
	tests := []struct {
		name                         string
		pod                          *corev1.Pod
		existing                     []*v1alpha1.NetworkInterface
		create, del, update, current []string
		replacing, kept              []string
	}{
		{
			name:   "new Pod",
			pod:    direct,
			create: []string{"web.eth0@pod-uid", "web.ext0@pod-uid"},
		},
		{
			name:     "nothing to do",
			pod:      plain,
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "")},
			current:  []string{"web.eth0@pod-uid"},
		},
		{
			name:     "Pod gone",
			pod:      nil,
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip")},
			del:      []string{"web.eth0@pod-uid", "web.ext0@pod-uid"},
		},
		{
			name:     "Pod gone, NIC already deleting",
			pod:      nil,
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "", nicDeleting)},
		},
		{
			name:     "Pod succeeded",
			pod:      testPod(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "")},
			del:      []string{"web.eth0@pod-uid"},
		},
		{
			name:     "terminating Pod keeps its NICs, even unwanted ones",
			pod:      testPod(deleting),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext9", "pod-uid", "")},
			current:  []string{"web.eth0@pod-uid", "web.ext9@pod-uid"},
		},
		{
			name:     "terminating Pod creates nothing",
			pod:      testPod(deleting, annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0"}]`)),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "")},
			current:  []string{"web.eth0@pod-uid"},
		},
		{
			name:     "annotation entry removed",
			pod:      plain,
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip")},
			del:      []string{"web.ext0@pod-uid"},
			current:  []string{"web.eth0@pod-uid"},
		},
		{
			name:     "unreadable annotations leave existing NICs alone",
			pod:      testPod(annotated(v1alpha1.AnnotationNetworks, `not json`)),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip")},
			current:  []string{"web.eth0@pod-uid", "web.ext0@pod-uid"},
		},
		{
			name:      "Pod re-created under the same name",
			pod:       direct,
			existing:  []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "old-uid", ""), existingNIC("web", "ext0", "old-uid", "gw-eip")},
			del:       []string{"web.eth0@old-uid", "web.ext0@old-uid"},
			replacing: []string{"web.eth0", "web.ext0"},
		},
		{
			name:      "old NIC still being deleted",
			pod:       plain,
			existing:  []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "old-uid", "", nicDeleting)},
			replacing: []string{"web.eth0"},
		},
		{
			name:     "stale NIC of an earlier Pod is deleted even while the Pod terminates",
			pod:      testPod(deleting),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "old-uid", "")},
			del:      []string{"web.eth0@old-uid"},
		},
		{
			name:      "ElasticIP changed in the annotation: replace",
			pod:       testPod(annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"other"}]`)),
			existing:  []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip")},
			del:       []string{"web.ext0@pod-uid"},
			current:   []string{"web.eth0@pod-uid"},
			replacing: []string{"web.ext0"},
		},
		{
			name:     "network set up: an ElasticIP added to eth0 later changes nothing",
			pod:      testPod(withIP, annotated(v1alpha1.AnnotationElasticIP, "gw-eip")),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "")},
			current:  []string{"web.eth0@pod-uid"},
			kept:     []string{"web.eth0"},
		},
		{
			name:     "network set up: an ElasticIP changed later changes nothing",
			pod:      testPod(withIP, annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"other"}]`)),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip")},
			current:  []string{"web.eth0@pod-uid", "web.ext0@pod-uid"},
			kept:     []string{"web.ext0"},
		},
		{
			name:     "network set up: an annotation removed later keeps the NIC",
			pod:      testPod(withIP),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", ""), existingNIC("web", "ext0", "pod-uid", "gw-eip")},
			current:  []string{"web.eth0@pod-uid", "web.ext0@pod-uid"},
			kept:     []string{"web.ext0"},
		},
		{
			name:     "network set up: an extra direct NIC added later is made (and marked, see TestLateDirectNICIsMarked)",
			pod:      testPod(withIP, annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"gw-eip"}]`)),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "")},
			create:   []string{"web.ext0@pod-uid"},
			current:  []string{"web.eth0@pod-uid"},
		},
		{
			name:      "wanted NIC deleted by someone is made again once gone",
			pod:       plain,
			existing:  []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "", nicDeleting)},
			current:   []string{"web.eth0@pod-uid"},
			replacing: []string{"web.eth0"},
		},
		{
			name:     "allocation identity follows the labels",
			pod:      testPod(labelled(v1alpha1.LabelKubeVirt, v1alpha1.LabelKubeVirtLauncher, v1alpha1.LabelKubeVirtVMName, "vm1")),
			existing: []*v1alpha1.NetworkInterface{existingNIC("web", "eth0", "pod-uid", "")},
			update:   []string{"web.eth0@pod-uid"},
			current:  []string{"web.eth0@pod-uid"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := planNICs(tt.pod, wantedNICs(tt.pod), tt.existing)
			for what, pair := range map[string][2][]string{
				"create":    {tt.create, names(p.Create)},
				"delete":    {tt.del, names(p.Delete)},
				"update":    {tt.update, names(p.Update)},
				"current":   {tt.current, names(p.Current)},
				"replacing": {tt.replacing, p.Replacing},
				"kept":      {tt.kept, p.Kept},
			} {
				if diff := cmp.Diff(pair[0], pair[1]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", what, diff)
				}
			}
		})
	}
}

func withIP(p *corev1.Pod) {
	p.Status.PodIP = "10.244.1.5"
	p.Status.PodIPs = []corev1.PodIP{{IP: "10.244.1.5"}}
}

// A direct NIC is marked spec.createdAfterPodNetwork exactly when it is made for a Pod
// whose network is already set up (a Pod IP, or the kubelet's PodReadyToStartContainers).
func TestLateDirectNICIsMarked(t *testing.T) {
	ann := annotated(v1alpha1.AnnotationNetworks, `[{"interface":"ext0","elasticIP":"gw-eip"},{"interface":"ext1"}]`)
	sandboxReady := func(p *corev1.Pod) {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"network not set up": {testPod(ann), false},
		"Pod IP":             {testPod(ann, withIP), true},
		"sandbox ready":      {testPod(ann, sandboxReady), true},
	} {
		marked := map[string]bool{}
		for _, n := range wantedNICs(tc.pod).NICs {
			marked[n.Name] = n.Spec.CreatedAfterPodNetwork
		}
		if marked["web.ext0"] != tc.want || marked["web.eth0"] || marked["web.ext1"] {
			t.Errorf("%s: marked %v, want only the direct web.ext0 marked %v", name, marked, tc.want)
		}
	}
}

func TestPlanUpdateDoesNotMutateCache(t *testing.T) {
	pod := testPod(labelled(v1alpha1.LabelKubeVirt, v1alpha1.LabelKubeVirtLauncher, v1alpha1.LabelKubeVirtVMName, "vm1"))
	cached := existingNIC("web", "eth0", "pod-uid", "")
	p := planNICs(pod, wantedNICs(pod), []*v1alpha1.NetworkInterface{cached})
	if len(p.Update) != 1 || p.Update[0].Spec.AllocationIdentity != "vmi.vm1" {
		t.Fatalf("update = %+v, want allocationIdentity vmi.vm1", p.Update)
	}
	if cached.Spec.AllocationIdentity != "" {
		t.Error("the cached NIC was modified")
	}
}

func TestUpdatedSpecNodeNameOnlyOnce(t *testing.T) {
	have := v1alpha1.NetworkInterfaceSpec{NodeName: "node-a"}
	if got := updatedSpec(have, v1alpha1.NetworkInterfaceSpec{NodeName: "node-b"}); got != nil {
		t.Errorf("nodeName rewritten: %+v", got)
	}
	got := updatedSpec(v1alpha1.NetworkInterfaceSpec{}, v1alpha1.NetworkInterfaceSpec{NodeName: "node-b"})
	if got == nil || got.NodeName != "node-b" {
		t.Errorf("empty nodeName not filled: %+v", got)
	}
}
