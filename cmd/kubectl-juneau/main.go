// Command kubectl-juneau is the kubectl plugin of juneau (`kubectl juneau ...` once it is
// on PATH): status of every ElasticIP, why one does not work, and what the Node using it
// holds for it (docs/troubleshooting.md#kubectl-juneau).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loutres/juneau/pkg/generated/clientset/versioned"
	"github.com/loutres/juneau/pkg/kubectlplugin"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}

type options struct {
	loading       *clientcmd.ClientConfigLoadingRules
	overrides     clientcmd.ConfigOverrides
	allNamespaces bool
	nodeNamespace string
}

func (o *options) clientConfig() clientcmd.ClientConfig {
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(o.loading, &o.overrides)
}

func (o *options) clients() (kubectlplugin.Clients, *rest.Config, string, error) {
	cc := o.clientConfig()
	cfg, err := cc.ClientConfig()
	if err != nil {
		return kubectlplugin.Clients{}, nil, "", err
	}
	ns, _, err := cc.Namespace()
	if err != nil {
		return kubectlplugin.Clients{}, nil, "", err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return kubectlplugin.Clients{}, nil, "", err
	}
	juneau, err := versioned.NewForConfig(cfg)
	if err != nil {
		return kubectlplugin.Clients{}, nil, "", err
	}
	return kubectlplugin.Clients{Kube: kube, Juneau: juneau, NodeNamespace: o.nodeNamespace}, cfg, ns, nil
}

func newRootCommand() *cobra.Command {
	o := &options{loading: clientcmd.NewDefaultClientConfigLoadingRules()}
	root := &cobra.Command{
		Use:           "kubectl-juneau",
		Short:         "Inspect juneau's ElasticIPs: status, why one does not work, what its Node holds",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	f := root.PersistentFlags()
	f.StringVar(&o.loading.ExplicitPath, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.overrides.CurrentContext, "context", "", "kubeconfig context")
	f.StringVarP(&o.overrides.Context.Namespace, "namespace", "n", "", "namespace (default: the context's)")
	f.StringVar(&o.nodeNamespace, "juneau-node-namespace", "juneau-node", "namespace of juneau's node agents")
	root.AddCommand(o.statusCommand(), o.whyCommand(), o.traceCommand())
	return root
}

func (o *options) statusCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status",
		Short: "every ElasticIP: address, user, Node answering or announcing it, Attached reason",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, _, ns, err := o.clients()
			if err != nil {
				return err
			}
			if o.allNamespaces {
				ns = ""
			}
			rows, err := c.Status(cmd.Context(), ns)
			if err != nil {
				return err
			}
			return kubectlplugin.WriteStatus(cmd.OutOrStdout(), rows)
		},
	}
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "every namespace")
	return cmd
}

func (o *options) whyCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "why NAME",
		Short: "the chain from a Pod (or ElasticIP) to the wire, naming the first broken link and what to do",
		Long: "why follows a Pod, or an ElasticIP, through every link juneau needs: scheduled, node agent on its Node, " +
			"Pod IP, ElasticIP assigned, address reserved, user, attached, ARP answer or BGP announcement, readiness gate. " +
			"It stops at the first link that does not hold and says what to do. NAME is an ElasticIP, else a Pod, of the namespace. " +
			"It exits 0 when every link holds and 2 otherwise.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, _, ns, err := o.clients()
			if err != nil {
				return err
			}
			facts, err := c.Gather(cmd.Context(), ns, args[0])
			if err != nil {
				return err
			}
			d := kubectlplugin.Diagnose(facts)
			fmt.Fprint(cmd.OutOrStdout(), d.String())
			if d.Broken() != nil {
				os.Exit(2)
			}
			return nil
		},
	}
}

func (o *options) traceCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "trace ELASTICIP",
		Short: "on the Node using the ElasticIP: its mapping in juneau's nftables table, the agent's ARP/NDP answers, the BGP announcement",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, cfg, ns, err := o.clients()
			if err != nil {
				return err
			}
			return c.Trace(cmd.Context(), cfg, ns, args[0], cmd.OutOrStdout())
		},
	}
}
