package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubectlResult is what one kubectl invocation printed.
type KubectlResult struct {
	Stdout, Stderr string
	Err            error
}

// Kubectl runs the built kubectl against the control plane with the admin kubeconfig.
// stdin may be empty.
func (cp *ControlPlane) Kubectl(ctx context.Context, stdin string, args ...string) KubectlResult {
	return cp.KubectlAs(ctx, cp.Kubeconfig, stdin, args...)
}

// KubectlAs runs the built kubectl with the given kubeconfig.
func (cp *ControlPlane) KubectlAs(ctx context.Context, kubeconfig, stdin string, args ...string) KubectlResult {
	return RunKubectl(ctx, cp.Binaries.Kubectl(), kubeconfig, stdin, args...)
}

// RunKubectl runs kubectl (the built one: the path of Binaries.Kubectl) with kubeconfig;
// stdin may be empty. The error carries kubectl's stderr.
func RunKubectl(ctx context.Context, kubectl, kubeconfig, stdin string, args ...string) KubectlResult {
	cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, errOut.String())
	}
	return KubectlResult{Stdout: out.String(), Stderr: errOut.String(), Err: err}
}

// installCRDs applies manifests/crds with kubectl and waits until every CRD is
// Established and our kinds are listable.
func (cp *ControlPlane) installCRDs(ctx context.Context) error {
	crdDir := filepath.Join(cp.RepoRoot, "manifests", "crds")
	if r := cp.Kubectl(ctx, "", "apply", "--server-side", "-f", crdDir); r.Err != nil {
		return r.Err
	}
	if r := cp.Kubectl(ctx, "", "wait", "--for=condition=Established", "--timeout=60s", "-f", crdDir); r.Err != nil {
		return r.Err
	}
	waitCtx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return waitFor(waitCtx, cp.apiserver, "waiting for juneau kinds to be served", func(ctx context.Context) error {
		j := cp.Juneau.JuneauV1alpha1()
		listOpts := metav1.ListOptions{Limit: 1}
		for _, list := range []func() error{
			func() error { _, err := j.AddressPools().List(ctx, listOpts); return err },
			func() error { _, err := j.ExternalNetworks().List(ctx, listOpts); return err },
			func() error { _, err := j.AllocationClaims().List(ctx, listOpts); return err },
			func() error { _, err := j.ElasticIPs("").List(ctx, listOpts); return err },
			func() error { _, err := j.ElasticIPAttachments("").List(ctx, listOpts); return err },
			func() error { _, err := j.NetworkInterfaces("").List(ctx, listOpts); return err },
			func() error { _, err := j.ARPAdvertisements().List(ctx, listOpts); return err },
		} {
			if err := list(); err != nil {
				return err
			}
		}
		return nil
	})
}
