// Command juneau is the single binary of juneau: the cluster controller, the admission
// webhook, the node agent and (when CNI_COMMAND is set) the CNI plugin.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// errNotImplemented is returned by roles whose issue has not landed yet.
var errNotImplemented = errors.New("not implemented yet")

// commonOptions are the flags every role shares.
type commonOptions struct {
	kubeconfig string
	qps        float32
	burst      int
}

func (o *commonOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig; empty means in-cluster configuration")
	fs.Float32Var(&o.qps, "kube-api-qps", 50, "queries per second to the API server")
	fs.IntVar(&o.burst, "kube-api-burst", 100, "burst of queries to the API server")
}

func newRootCommand() *cobra.Command {
	opts := &commonOptions{}
	root := &cobra.Command{
		Use:           "juneau",
		Short:         "juneau gives Pods externally reachable IPv4 addresses (ElasticIPs)",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	opts.addFlags(root.PersistentFlags())
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	root.PersistentFlags().AddGoFlagSet(klogFlags)

	root.AddCommand(
		newVersionCommand(),
		newTraceCommand(),
		newControllerCommand(opts),
		newWebhookCommand(opts),
		newNodeCommand(opts),
	)
	return root
}

func main() {
	if os.Getenv("CNI_COMMAND") != "" {
		os.Exit(runCNI())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCommand().ExecuteContext(ctx)
	klog.Flush()
	if err != nil {
		fmt.Fprintln(os.Stderr, "juneau:", err)
		os.Exit(1)
	}
}
