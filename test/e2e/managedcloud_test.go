package e2e

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/test/e2e/harness"
	"github.com/loutres/juneau/test/framework"
)

// The managed service's documentation shows three manifests: a Deployment whose Pods
// ask for an ElasticIP of 5 Mbit/s, a StatefulSet whose Pod names an existing one by its
// instance ID, and a Pod whose init container waits in a downward-API file for
// allocated-eip-id; and a readiness gate k8s.aliyun.com/eip. They are applied here as
// written, images aside (the harness's image, as its Pods run no containers).
//
// What the harness emulates, as it plays scheduler, workload controllers and kubelet:
//   - the Deployment and StatefulSet controllers: their ReplicaSet and Pods are made from
//     the applied objects' templates with the controller references those controllers set;
//   - the scheduler and the kubelet's network setup: the Pod is bound to a Node and
//     plumbed by the real CNI chain (ptp, then juneau), as a container runtime does;
//   - the downward-API volume: a file with the Pod's annotations as the kubelet writes
//     them, kept up to date by polling the Pod;
//   - the init container: its command, read from the Pod object, runs in the Pod's
//     network namespace with the volume's mount path pointing at that file, busybox's
//     `timeout -t 60` read as coreutils' `timeout 60`;
//   - the kubelet's evaluation of readiness gates is not emulated: the test reads the
//     gate condition the node agent writes.
//
// The same manifests run under a real kubelet on the real-cluster tier.
const (
	seedDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: example
  labels:
    app: example
spec:
  replicas: 1
  selector:
    matchLabels:
      app: example
  template:
    metadata:
      labels:
        app: example
      annotations:
        network.alibabacloud.com/pod-with-eip: "true"
        network.alibabacloud.com/eip-bandwidth: "5"
    spec:
      readinessGates:
      - conditionType: "k8s.aliyun.com/eip"
      containers:
      - name: example
        image: IMAGE
        ports:
        - containerPort: 80
`
	seedStatefulSet = `apiVersion: apps/v1
kind: StatefulSet
metadata:
  labels:
    app: example
  name: example
spec:
  replicas: 1
  selector:
    matchLabels:
      app: example
  template:
    metadata:
      labels:
        app: example
      annotations:
        network.alibabacloud.com/pod-eip-instanceid: eip-xxxxx66wjkj16lf9xxxxx
    spec:
      containers:
      - name: example
        image: IMAGE
        ports:
        - containerPort: 80
`
	seedInitPod = `apiVersion: v1
kind: Pod
metadata:
  name: example
  annotations:
    network.alibabacloud.com/pod-with-eip: "true"
spec:
  containers:
  - name: example
    image: IMAGE
    command: ['sh', '-c', 'echo "The app is running!" && sleep 3600']
  initContainers:
  - name: init
    image: IMAGE
    command: ['timeout', '-t' ,'60', 'sh','-c', "until grep 'network.alibabacloud.com/allocated-eip-id' /etc/podinfo/annotations; do echo 'waiting for the annotation'; sleep 2; done"]
    volumeMounts:
    - name: podinfo
      mountPath: /etc/podinfo
  volumes:
  - name: podinfo
    downwardAPI:
      items:
      - path: "labels"
        fieldRef:
          fieldPath: metadata.labels
      - path: "annotations"
        fieldRef:
          fieldPath: metadata.annotations
`
	// harnessImage replaces the documentation's images.
	harnessImage = "registry.k8s.io/pause:3.10"
)

// TestManagedCloudManifests runs the three manifests (see above).
func TestManagedCloudManifests(t *testing.T) {
	c, ns := setup(t)
	annotateDefault(t, c)
	// kubectl create, not apply: apply would record the whole manifest in the
	// last-applied-configuration annotation, where the init container's grep pattern
	// would find itself at once (docs/automatic.md#learning-the-address-inside-the-pod).
	create := func(manifest string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if r := c.CP.Kubectl(ctx, strings.ReplaceAll(manifest, "IMAGE", harnessImage), "create", "-n", ns, "-f", "-"); r.Err != nil {
			t.Fatal(r.Err)
		}
	}

	// The harness's helpers fail the test that made the cluster, so the three parts run
	// in turn rather than as subtests.
	start := time.Now()
	seedDeploymentPod(t, c, ns, create)
	t.Logf("the Deployment's manifest worked (%s)", time.Since(start).Round(time.Second))
	seedStatefulSetPod(t, c, ns, create)
	t.Logf("the StatefulSet's manifest worked (%s)", time.Since(start).Round(time.Second))
	seedInitContainerPod(t, c, ns, create)
	t.Logf("the init container's manifest worked (%s)", time.Since(start).Round(time.Second))
}

// seedDeploymentPod: the Deployment's Pod gets an automatic ElasticIP of 5 Mbit/s, the
// managed-cloud annotations, and the k8s.aliyun.com/eip gate once it is reachable; its
// ElasticIP follows it.
func seedDeploymentPod(t *testing.T, c *harness.Cluster, ns string, create func(string)) {
	ctx := testContext(t)
	create(seedDeployment)
	p := startFromDeployment(t, c, ns, "example", "node-a")
	c.ServeTCP(p.NS, "deployment", 80)
	ann := waitManagedCloudAnnotations(t, c, ns, p.Spec.Name)
	if ann[v1alpha1.AliasAllocatedEIPID] != p.Spec.Name {
		t.Errorf("allocated-eip-id %q, want the ElasticIP named after the Pod %q", ann[v1alpha1.AliasAllocatedEIPID], p.Spec.Name)
	}
	addr := ann[v1alpha1.AliasAllocatedEIPAddress]
	gateTrueOnlyWhenReachable(t, c, ns, p.Spec.Name, v1alpha1.PodConditionManagedCloudEIP, addr, "deployment")
	eip, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPs(ns).Get(ctx, p.Spec.Name, metav1.GetOptions{})
	if err != nil || eip.Spec.BandwidthMbps == nil || *eip.Spec.BandwidthMbps != 5 {
		t.Errorf("ElasticIP %q: %+v %v, want 5 Mbit/s", p.Spec.Name, eip, err)
	}
	// A Deployment's Pod does not come back under its name: its ElasticIP follows it.
	p.Gone()
	c.WaitGone("the Deployment Pod's ElasticIP released", func(ctx context.Context) bool {
		_, err := c.CP.Juneau.JuneauV1alpha1().AllocationClaims().Get(ctx, addr, metav1.GetOptions{})
		return err != nil
	})
}

// seedStatefulSetPod: the StatefulSet's Pod gets the ElasticIP its manifest names by
// instance ID, again when the StatefulSet makes it again, and the ElasticIP is never
// released with it.
func seedStatefulSetPod(t *testing.T, c *harness.Cluster, ns string, create func(string)) {
	// The instance ID in the manifest names an ElasticIP the user made.
	const instance = "eip-xxxxx66wjkj16lf9xxxxx"
	createElasticIP(t, c, ns, instance)
	want := c.WaitElasticIPAvailable(ns, instance)
	create(seedStatefulSet)
	for round := range 2 { // the Pod, then the same Pod re-created by its StatefulSet
		p := startFromStatefulSet(t, c, ns, "example", 0, "node-b")
		c.ServeTCP(p.NS, fmt.Sprintf("sts-%d", round), 80)
		ann := waitManagedCloudAnnotations(t, c, ns, p.Spec.Name)
		if ann[v1alpha1.AliasAllocatedEIPID] != instance || ann[v1alpha1.AliasAllocatedEIPAddress] != want {
			t.Errorf("round %d: allocated-eip-id %q, allocated-eipAddress %q; want %q, %q", round,
				ann[v1alpha1.AliasAllocatedEIPID], ann[v1alpha1.AliasAllocatedEIPAddress], instance, want)
		}
		c.EventuallyDial(c.Client, want, 80, fmt.Sprintf("sts-%d", round))
		p.Gone()
		// The named ElasticIP is the user's: never released with the Pod.
		c.WaitGone("the attachment gone with the Pod", func(ctx context.Context) bool {
			_, err := c.CP.Juneau.JuneauV1alpha1().ElasticIPAttachments(ns).Get(ctx, p.Spec.Name, metav1.GetOptions{})
			return err != nil
		})
		if got := c.WaitElasticIPAvailable(ns, instance); got != want {
			t.Errorf("round %d: the named ElasticIP has %q, want %q", round, got, want)
		}
	}
}

// seedInitContainerPod: the init container finds allocated-eip-id in its downward-API
// file; the Pod, created directly, gets the same address when created again under its
// name.
func seedInitContainerPod(t *testing.T, c *harness.Cluster, ns string, create func(string)) {
	var first string
	for round := range 2 { // created, then deleted and created again under its name
		create(seedInitPod)
		p, err := c.BindAndStart(ns, "example", "node-a")
		if err != nil {
			t.Fatal(err)
		}
		out := runInitContainer(t, c, p)
		if !strings.Contains(out, v1alpha1.AliasAllocatedEIPID+"=") {
			t.Fatalf("round %d: the init container ended without finding allocated-eip-id:\n%s", round, out)
		}
		ann := waitManagedCloudAnnotations(t, c, ns, "example")
		addr := ann[v1alpha1.AliasAllocatedEIPAddress]
		c.ServeTCP(p.NS, fmt.Sprintf("init-%d", round), 80)
		c.EventuallyDial(c.Client, addr, 80, fmt.Sprintf("init-%d", round))
		if round == 0 {
			first = addr
		} else if addr != first {
			t.Errorf("the Pod re-created under its name got %s, want its address %s back", addr, first)
		}
		p.Gone()
	}
}

// startFromDeployment plays the Deployment and ReplicaSet controllers for one replica:
// a ReplicaSet and a Pod made from the Deployment's template, then scheduled and
// started on node.
func startFromDeployment(t *testing.T, c *harness.Cluster, ns, name, node string) *harness.Pod {
	t.Helper()
	ctx := context.Background()
	apps := c.CP.Kube.AppsV1()
	d, err := apps.Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const hash = "6d9f7c8b4d" // pod-template-hash: any stable value does
	tmpl := *d.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(tmpl.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs, err := apps.ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-" + hash, Labels: tmpl.Labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](1), Template: tmpl,
			Selector: &metav1.LabelSelector{MatchLabels: tmpl.Labels}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return startFromTemplate(t, c, ns, rs.Name+"-x2k7q", node, tmpl, rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))
}

// startFromStatefulSet plays the StatefulSet controller: Pod <name>-<ordinal> made from
// the StatefulSet's template, then scheduled and started on node.
func startFromStatefulSet(t *testing.T, c *harness.Cluster, ns, name string, ordinal int, node string) *harness.Pod {
	t.Helper()
	s, err := c.CP.Kube.AppsV1().StatefulSets(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := name + "-" + strconv.Itoa(ordinal)
	tmpl := *s.Spec.Template.DeepCopy()
	tmpl.Labels = withLabel(tmpl.Labels, appsv1.StatefulSetPodNameLabel, pod)
	return startFromTemplate(t, c, ns, pod, node, tmpl, s, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))
}

// startFromTemplate creates the Pod a workload controller makes from its template, with
// the controller reference, and has the harness schedule and start it.
func startFromTemplate(t *testing.T, c *harness.Cluster, ns, name, node string, tmpl corev1.PodTemplateSpec,
	owner metav1.Object, kind schema.GroupVersionKind) *harness.Pod {
	t.Helper()
	if _, err := c.CP.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: tmpl.Labels, Annotations: tmpl.Annotations,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, kind)}},
		Spec: tmpl.Spec,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := c.BindAndStart(ns, name, node)
	if err != nil {
		t.Fatalf("starting Pod %s: %v", name, err)
	}
	return p
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for key, val := range labels {
		out[key] = val
	}
	return out
}

// waitManagedCloudAnnotations waits until the Pod carries the managed service's
// written-back annotations, with the NetworkInterface's name, and juneau's own with the
// same values; it returns them.
func waitManagedCloudAnnotations(t *testing.T, c *harness.Cluster, ns, name string) map[string]string {
	t.Helper()
	var ann map[string]string
	c.WaitGone("the managed-cloud annotations on Pod "+name, func(ctx context.Context) bool {
		pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		ann = pod.Annotations
		return ann[v1alpha1.AliasAllocatedEIPID] != "" && ann[v1alpha1.AliasAllocatedEIPAddress] != "" && ann[v1alpha1.AliasAllocatedENIID] != ""
	})
	if got, want := ann[v1alpha1.AliasAllocatedENIID], v1alpha1.NetworkInterfaceName(name, v1alpha1.DefaultInterface); got != want {
		t.Errorf("allocated-eni-id %q, want the NetworkInterface %q", got, want)
	}
	if net.ParseIP(ann[v1alpha1.AliasAllocatedEIPAddress]) == nil ||
		ann[v1alpha1.AnnotationAllocatedEIPName] != ann[v1alpha1.AliasAllocatedEIPID] ||
		ann[v1alpha1.AnnotationAllocatedEIPAddr] != ann[v1alpha1.AliasAllocatedEIPAddress] {
		t.Errorf("written-back annotations disagree: %v", ann)
	}
	return ann
}

// gateTrueOnlyWhenReachable waits for the Pod's gate condition of that type to turn
// True and checks that the external client reaches the Pod at that moment (the first
// attempt must succeed), and that the agent set no gate the Pod does not list.
func gateTrueOnlyWhenReachable(t *testing.T, c *harness.Cluster, ns, name, gateType, addr, answer string) {
	t.Helper()
	sawFalse := false
	framework.EventuallyWithin(t, time.Minute, "gate "+gateType+" True", func(ctx context.Context) (bool, string) {
		g := gateOf(c, ns, name, gateType)
		if g == nil {
			return false, "no condition"
		}
		if g.Status == corev1.ConditionFalse {
			sawFalse = true
		}
		return g.Status == corev1.ConditionTrue && g.Reason == v1alpha1.ReasonProgrammed, fmt.Sprintf("%s %s: %s", g.Status, g.Reason, g.Message)
	})
	if got, err := harness.Dial(c.Client, addr, 80); err != nil || got != answer+" "+harness.ClientIP {
		t.Errorf("right after gate %s turned True: %q %v", gateType, got, err)
	}
	pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cond := range pod.Status.Conditions {
		if string(cond.Type) == v1alpha1.PodConditionElasticIP {
			t.Errorf("the Pod lists only %s but got %s too", gateType, v1alpha1.PodConditionElasticIP)
		}
	}
	if !sawFalse {
		t.Logf("the gate was already True when first read")
	}
}

// gateOf returns the Pod's condition of that type, if set.
func gateOf(c *harness.Cluster, ns, name, condType string) *corev1.PodCondition {
	pod, err := c.CP.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	for i := range pod.Status.Conditions {
		if string(pod.Status.Conditions[i].Type) == condType {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

// runInitContainer runs the Pod's first init container as the kubelet would, with its
// downwardAPI volume emulated (see the comment at the top), and returns its output. It
// fails the test if the command fails or times out.
func runInitContainer(t *testing.T, c *harness.Cluster, p *harness.Pod) string {
	t.Helper()
	pod := p.Object
	if len(pod.Spec.InitContainers) == 0 {
		t.Fatalf("Pod %s has no init container", pod.Name)
	}
	ic := pod.Spec.InitContainers[0]
	args := append(append([]string(nil), ic.Command...), ic.Args...)
	timeout := time.Minute
	if len(args) > 3 && args[0] == "timeout" && args[1] == "-t" {
		secs, err := strconv.Atoi(args[2])
		if err != nil {
			t.Fatalf("init container command %q", args)
		}
		timeout, args = time.Duration(secs)*time.Second, args[3:]
	}
	// The downwardAPI volume: the file of metadata.annotations at its item's path.
	file := ""
	for _, m := range ic.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name != m.Name || v.DownwardAPI == nil {
				continue
			}
			for _, item := range v.DownwardAPI.Items {
				if item.FieldRef != nil && item.FieldRef.FieldPath == "metadata.annotations" {
					file = m.MountPath + "/" + item.Path
				}
			}
		}
	}
	if file == "" {
		t.Fatalf("the init container of %s mounts no downward-API annotations", pod.Name)
	}
	emulated := downwardAPI(t, c, pod.Namespace, pod.Name, pod.UID)
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, file, emulated)
	}
	start := time.Now()
	out, err := p.NS.Output("timeout", append([]string{strconv.Itoa(int(timeout.Seconds()))}, args...)...)
	if err != nil {
		t.Fatalf("the init container failed after %s: %v\n%s", time.Since(start).Round(time.Millisecond), err, out)
	}
	t.Logf("the init container found the annotation after %s", time.Since(start).Round(time.Millisecond))
	return out
}
