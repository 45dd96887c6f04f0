package wiring

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	juneaufake "github.com/loutres/juneau/pkg/generated/clientset/versioned/fake"
)

// TestRunStopsEarly: Run checks its flags before it makes clients, and stops at the
// first thing it cannot have, before it serves or touches the Node.
func TestRunStopsEarly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	errClients := errors.New("no kubeconfig")
	for _, tc := range []struct {
		name    string
		o       Options
		clients error
		want    string
	}{
		{name: "invalid flag", o: Options{}, want: "--node-name"},
		{name: "invalid cluster CIDR", o: Options{NodeName: nodeName, ClusterCIDRs: []string{"10.244.0.0"}}, want: "--cluster-cidr"},
		{name: "no clients", o: Options{NodeName: nodeName}, clients: errClients, want: errClients.Error()},
		{name: "no external interface", o: Options{NodeName: nodeName, ExternalInterface: "no-such-if0"}, want: `external interface "no-such-if0"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			madeClients := false
			err := Run(ctx, tc.o, Process{
				Clients: func() (kubernetes.Interface, versioned.Interface, error) {
					madeClients = true
					return kubefake.NewClientset(), juneaufake.NewClientset(), tc.clients
				},
				Serve: func(context.Context, kubernetes.Interface) (prometheus.Registerer, func(), error) {
					t.Fatal("Run served before it could run")
					return nil, nil, nil
				},
			})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error containing %q", err, tc.want)
			}
			if flagErr := strings.HasPrefix(tc.want, "--"); madeClients == flagErr {
				t.Errorf("clients made: %v, with a flag error: %v", madeClients, flagErr)
			}
		})
	}
}
