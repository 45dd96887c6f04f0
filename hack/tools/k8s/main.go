// Command kube is the Kubernetes commands the real cluster and the integration tests run
// (kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy, kubelet and
// kubectl) in one binary, which runs the command named by the name it was started as:
// hack/build-control-plane.sh links each of those names to it. Built as one binary, the
// packages the commands share are compiled once and the whole is linked once instead of
// six times: that compile is most of what a fresh machine spends before its first
// make demo (README.md, "The two commands").
// Each command starts exactly as the main package of k8s.io/kubernetes/cmd/<name> does.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	_ "time/tzdata" // CronJob time zones (kube-apiserver, kube-controller-manager)

	"github.com/spf13/cobra"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// servers are the commands that run as cli.Run runs them.
var servers = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
	"kube-proxy":              proxy.NewProxyCommand,
	"kubelet":                 func() *cobra.Command { return kubelet.NewKubeletCommand(context.Background()) },
}

func main() {
	name := filepath.Base(os.Args[0])
	if name == "kubectl" {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) //nolint:errcheck // as kubectl's main
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return
	}
	newCommand, ok := servers[name]
	if !ok {
		names := append([]string{"kubectl"}, keys(servers)...)
		slices.Sort(names)
		fmt.Fprintf(os.Stderr, "%s: start this binary as one of %s (a link of that name)\n", name, strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(cli.Run(newCommand()))
}

func keys(m map[string]func() *cobra.Command) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
