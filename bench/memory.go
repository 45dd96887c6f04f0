package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	juneauclient "github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneauinformers "github.com/loutres/juneau/pkg/generated/informers/externalversions"
	"github.com/loutres/juneau/test/framework"
)

// informersCommand caches what the controller watches with plain shared informers and
// does nothing else: the memory baseline of row 6.
const informersCommand = "informers"

func informersMain(args []string) int {
	fs := flag.NewFlagSet(informersCommand, flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the control plane")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cfg.QPS, cfg.Burst = apiQPS, apiBurst
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	kube := kubernetes.NewForConfigOrDie(cfg)
	juneau := juneauclient.NewForConfigOrDie(cfg)
	kubeInf := kubeinformers.NewSharedInformerFactory(kube, 0)
	juneauInf := juneauinformers.NewSharedInformerFactory(juneau, 0)
	// The kinds `juneau controller` watches, and no more.
	kubeInf.Core().V1().Pods().Informer()
	kubeInf.Core().V1().Nodes().Informer()
	j := juneauInf.Juneau().V1alpha1()
	j.ElasticIPs().Informer()
	j.AllocationClaims().Informer()
	j.AddressPools().Informer()
	j.ExternalNetworks().Informer()
	j.ElasticIPAttachments().Informer()
	j.NetworkInterfaces().Informer()
	j.ARPAdvertisements().Informer()
	kubeInf.Start(ctx.Done())
	juneauInf.Start(ctx.Done())
	kubeInf.WaitForCacheSync(ctx.Done())
	juneauInf.WaitForCacheSync(ctx.Done())
	fmt.Println("synced")
	<-ctx.Done()
	kubeInf.Shutdown()
	juneauInf.Shutdown()
	return 0
}

// populate creates n ElasticIPs (reserved and Available, as the controller leaves them),
// n Pods with their addresses and n NetworkInterfaces, directly through the API.
func populate(ctx context.Context, e *env, cp *framework.ControlPlane, ns, network string, n int) {
	kube, juneau := fastKube(cp), fastClient(cp)
	idx := make(chan int, n)
	for i := range n {
		idx <- i
	}
	close(idx)
	g, gctx := errgroup.WithContext(ctx)
	for range 32 {
		g.Go(func() error {
			for i := range idx {
				if err := createEIP(gctx, juneau, ns, network, i); err != nil {
					return err
				}
				pod, err := createPod(gctx, kube, ns, i)
				if err != nil {
					return err
				}
				if err := createNIC(gctx, juneau, pod); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		e.Fatalf("creating objects: %v", err)
	}
}

func createEIP(ctx context.Context, c juneauclient.Interface, ns, network string, i int) error {
	j := c.JuneauV1alpha1()
	eip, err := j.ElasticIPs(ns).Create(ctx, &v1alpha1.ElasticIP{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("eip-%d", i)},
		Spec:       v1alpha1.ElasticIPSpec{ExternalNetwork: network},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	addr := netip.AddrFrom4([4]byte{10, 225, byte(i / 250), byte(i%250 + 1)}).String()
	if _, err := j.AllocationClaims().Create(ctx, &v1alpha1.AllocationClaim{
		ObjectMeta: metav1.ObjectMeta{Name: addr},
		Spec: v1alpha1.AllocationClaimSpec{AddressPool: network, Address: addr,
			Consumer: v1alpha1.ConsumerReference{Kind: v1alpha1.ConsumerKindElasticIP, Namespace: ns, Name: eip.Name, UID: string(eip.UID)}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	eip.Status = availableStatus(addr, network, eip.Generation)
	_, err = j.ElasticIPs(ns).UpdateStatus(ctx, eip, metav1.UpdateOptions{})
	return err
}

func createPod(ctx context.Context, kube kubernetes.Interface, ns string, i int) (*corev1.Pod, error) {
	pods := kube.CoreV1().Pods(ns)
	pod, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%10),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	ip := netip.AddrFrom4([4]byte{10, 244, byte(i / 250), byte(i%250 + 1)}).String()
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	return pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{})
}

// createNIC creates the Pod's eth0 NetworkInterface as the controller makes it, Ready.
func createNIC(ctx context.Context, c juneauclient.Interface, pod *corev1.Pod) error {
	ref := metav1.NewControllerRef(pod, corev1.SchemeGroupVersion.WithKind("Pod"))
	ref.BlockOwnerDeletion = nil
	nics := c.JuneauV1alpha1().NetworkInterfaces(pod.Namespace)
	nic, err := nics.Create(ctx, &v1alpha1.NetworkInterface{
		ObjectMeta: metav1.ObjectMeta{Name: v1alpha1.NetworkInterfaceName(pod.Name, v1alpha1.DefaultInterface),
			OwnerReferences: []metav1.OwnerReference{*ref}},
		Spec: v1alpha1.NetworkInterfaceSpec{NodeName: pod.Spec.NodeName,
			PodRef: v1alpha1.PodReference{Name: pod.Name, UID: string(pod.UID), Interface: v1alpha1.DefaultInterface}},
	}, metav1.CreateOptions{FieldManager: v1alpha1.FieldManagerController})
	if err != nil {
		return err
	}
	addr := pod.Status.PodIP + "/32"
	nic.Status = v1alpha1.NetworkInterfaceStatus{Phase: v1alpha1.NetworkInterfaceReady, Address: addr,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonReady,
			ObservedGeneration: nic.Generation, LastTransitionTime: metav1.Now(), Message: fmt.Sprintf("address %s of Pod %q", addr, pod.Name)}}}
	_, err = nics.UpdateStatus(ctx, nic, metav1.UpdateOptions{FieldManager: v1alpha1.FieldManagerController})
	return err
}

// waitIdle waits until pid used less than 5% of a CPU over two seconds, and returns its
// usage then.
func waitIdle(e *env, pid int, what string, timeout time.Duration) procUsage {
	last, err := readUsage(pid)
	if err != nil {
		e.Fatalf("%s: %v", what, err)
	}
	start := time.Now()
	err = wait.PollUntilContextTimeout(context.Background(), 2*time.Second, timeout, false,
		func(context.Context) (bool, error) {
			now, err := readUsage(pid)
			if err != nil {
				return false, err
			}
			idle := now.CPU-last.CPU < 100*time.Millisecond
			last = now
			return idle, nil
		})
	if err != nil {
		e.Fatalf("%s did not settle within %s: %v", what, timeout, err)
	}
	e.Logf("%s idle after %s: RSS %s (peak %s), %s CPU", what, time.Since(start).Round(time.Second),
		bytesQ(float64(last.RSS)), bytesQ(float64(last.PeakRSS)), last.CPU)
	return last
}

// benchMemory (row 6): the controller's resident memory with 10,000 ElasticIPs, 10,000
// Pods and their NetworkInterfaces, against a process that only caches the same kinds
// with plain shared informers.
func benchMemory(ctx context.Context, e *env) []Row {
	n := 10000
	if e.cfg.quick {
		n = 1000
	}
	cp := startControlPlane(ctx, e)
	const ns, network = "mem", "mem"
	ensureNamespace(e, cp, ns)
	createNetwork(e, cp, network, "10.225.0.0/16")
	start := time.Now()
	populate(ctx, e, cp, ns, network, n)
	e.Logf("created %d ElasticIPs (with claims), Pods and NetworkInterfaces in %s", n, time.Since(start).Round(time.Second))

	self, err := os.Executable()
	if err != nil {
		e.Fatal(err)
	}
	inf := framework.StartCommand(e, "informers", self, informersCommand, "--kubeconfig="+cp.Kubeconfig)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		done, _ := inf.Exited()
		return inf.Log() == "synced" || done, nil
	}); err != nil || inf.Log() != "synced" {
		e.Fatalf("informers did not sync: %v\n%s", err, inf.LogTail(10))
	}
	infPID, err := childProcess(informersCommand, "--kubeconfig="+cp.Kubeconfig)
	if err != nil {
		e.Fatal(err)
	}
	base := waitIdle(e, infPID, "plain informers", 5*time.Minute)
	inf.Stop()

	ctrl := startController(e, cp)
	prof := e.startProfile(ctrl.pid, "memory-controller-start")
	got := waitIdle(e, ctrl.pid, "controller", 10*time.Minute)
	e.stopProfile(prof)
	e.heapProfile(ctrl.pid, "memory-controller-heap")
	return []Row{{ID: "6", What: fmt.Sprintf("controller RSS, %s ElasticIPs + Pods + NetworkInterfaces", thousands(n)),
		Figure: bytesQ(float64(got.RSS)), Baseline: bytesQ(float64(base.RSS)), BaselineWhat: "plain informers, same kinds",
		Target: below(bytesQ(250 << 20)),
		Note: fmt.Sprintf("objects created directly through the API (with %d AllocationClaims), then the process started; VmRSS once it used < 5%% CPU over 2 s; peak (VmHWM) controller %s, informers %s; controller CPU to settle %s",
			n, bytesQ(float64(got.PeakRSS)), bytesQ(float64(base.PeakRSS)), got.CPU.Round(10*time.Millisecond))}}
}
