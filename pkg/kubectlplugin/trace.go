package kubectlplugin

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	corev1 "k8s.io/api/core/v1"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
)

// Trace prints what the Node using the ElasticIP namespace/name holds for it: the
// advertisement, the BGP sessions, and (by running `juneau trace` in the agent's
// container there) the NAT mapping, limit and ARP/NDP answering of its kernel and agent.
func (c Clients) Trace(ctx context.Context, cfg *rest.Config, namespace, name string, w io.Writer) error {
	eip, err := c.Juneau.JuneauV1alpha1().ElasticIPs(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	f := Facts{Namespace: namespace, Name: name, ElasticIP: eip, ElasticIPName: name}
	if err := c.podOfElasticIP(ctx, &f); err != nil {
		return err
	}
	if err := c.rest(ctx, &f); err != nil {
		return err
	}
	fmt.Fprintf(w, "ElasticIP %s/%s: address %s, phase %s\n", namespace, name, dash(eip.Status.Address), eip.Status.Phase)
	if f.Pod != nil {
		fmt.Fprintf(w, "used by Pod %s/%s (IP %s) on Node %s\n", f.Pod.Namespace, f.Pod.Name, dash(f.Pod.Status.PodIP), dash(f.Pod.Spec.NodeName))
	}
	if f.ARP != nil {
		fmt.Fprintf(w, "ARPAdvertisement %s: Node %s, Answering %s\n", f.ARP.Name, f.ARP.Spec.NodeName, condText(f.ARP.Status.Conditions, v1alpha1.ConditionAnswering))
	}
	if f.BGP != nil {
		fmt.Fprintf(w, "BGPAdvertisement %s: Node %s, Announced %s\n", f.BGP.Name, f.BGP.Spec.NodeName, condText(f.BGP.Status.Conditions, v1alpha1.ConditionAnnounced))
	}
	if f.BGPNode != nil {
		for _, p := range f.BGPNode.Status.Peers {
			fmt.Fprintf(w, "BGP session of Node %s to %s (%s): %s, %d prefixes announced %s\n", f.Node, p.Name, p.PeerAddress, p.State, p.PrefixesAnnounced, p.StateMessage)
		}
	}
	if f.Node == "" || eip.Status.Address == "" {
		fmt.Fprintln(w, "no Node uses the address")
		return nil
	}
	if f.Agent.Pod == "" {
		fmt.Fprintf(w, "no juneau agent on Node %s\n", f.Node)
		return nil
	}
	fmt.Fprintf(w, "on Node %s (agent %s):\n", f.Node, f.Agent.Pod)
	// `juneau trace` always prints its report whole, in one write. An exec can still
	// end without error while part of its output was lost (seen on a loaded Node: the
	// command ran, but its output, or its first line, never came back), so an
	// incomplete report is asked for again, after a pause that doubles each time.
	var out []byte
	tries := 0
	err = wait.ExponentialBackoffWithContext(ctx, traceBackoff, func(ctx context.Context) (bool, error) {
		tries++
		var err error
		out, err = c.exec(ctx, cfg, f.Agent.Pod, []string{"juneau", "trace", eip.Status.Address})
		return err == nil && wholeTrace(out), err
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		err = fmt.Errorf("juneau trace in %s/%s came back incomplete %d times", c.NodeNamespace, f.Agent.Pod, tries)
	}
	w.Write(out)
	return err
}

// traceBackoff paces the asks for a whole report: five, 200 ms to 1.6 s apart.
var traceBackoff = wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 5}

// wholeTrace reports whether out is a whole report of `juneau trace`: its NAT, limit
// and ARP or NDP lines, in that order, the NAT one first.
func wholeTrace(out []byte) bool {
	rest, ok := bytes.CutPrefix(out, []byte("nat: "))
	if !ok {
		return false
	}
	i := bytes.Index(rest, []byte("\nlimit: "))
	return i >= 0 && (bytes.Contains(rest[i:], []byte("\narp: ")) || bytes.Contains(rest[i:], []byte("\nndp: ")))
}

func condText(conds []metav1.Condition, t string) string {
	c := meta.FindStatusCondition(conds, t)
	if c == nil {
		return "unset"
	}
	return fmt.Sprintf("%s (%s: %s)", c.Status, c.Reason, c.Message)
}

// exec runs argv in the agent container of the Pod and returns its output.
func (c Clients) exec(ctx context.Context, cfg *rest.Config, pod string, argv []string) ([]byte, error) {
	req := c.Kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(c.NodeNamespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "agent", Command: argv, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return nil, err
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", req.URL().String())
	if err != nil {
		return nil, err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, func(error) bool { return true })
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out, Stderr: &out})
	if err != nil {
		return out.Bytes(), fmt.Errorf("juneau trace in %s/%s: %w", c.NodeNamespace, pod, err)
	}
	return out.Bytes(), nil
}
