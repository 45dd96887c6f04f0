package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/node/cniserver"
)

// Defaults and bounds of the plugin configuration.
const (
	DefaultWait     = 10 * time.Second
	DefaultStateDir = "/var/lib/cni/juneau"
	// MaxWait bounds waitSeconds: the runtime gives up on a Pod sandbox long before
	// (the kubelet's --runtime-request-timeout is 2 minutes by default).
	MaxWait = 10 * time.Minute
)

// Config is the plugin's entry in the network configuration list:
//
//	{"type": "juneau", "agentSocket": "/run/juneau/cni.sock", "waitSeconds": 10,
//	 "stateDir": "/var/lib/cni/juneau", "logFile": "/var/log/juneau-cni.log", "logVerbosity": 2}
//
// Every key but type is optional.
type Config struct {
	cnitypes.PluginConf
	// AgentSocket is the node agent's unix socket.
	AgentSocket string `json:"agentSocket,omitempty"`
	// WaitSeconds is how long ADD waits for every direct NIC to hold its ElasticIP.
	WaitSeconds *float64 `json:"waitSeconds,omitempty"`
	// StateDir keeps, per container and interface, what ADD changed so DEL can undo it.
	StateDir string `json:"stateDir,omitempty"`
	// LogFile receives the plugin's log besides stderr.
	LogFile string `json:"logFile,omitempty"`
	// LogVerbosity is the klog verbosity of the plugin's log.
	LogVerbosity int `json:"logVerbosity,omitempty"`

	// prev is the primary plugin's result (RawPrevResult parsed), nil if absent.
	prev *current.Result
	// prevErr says why prevResult could not be read; only ADD needs it, so DEL still
	// cleans up when the runtime's cached result is damaged.
	prevErr error
}

// Wait is how long ADD waits for the NICs to hold their ElasticIPs.
func (c *Config) Wait() time.Duration {
	if c.WaitSeconds == nil {
		return DefaultWait
	}
	return time.Duration(*c.WaitSeconds * float64(time.Second))
}

// parseConfig decodes the plugin's stdin and fills in defaults.
func parseConfig(stdin []byte) (*Config, error) {
	conf := &Config{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, boundedErr(fmt.Errorf("decode network configuration: %w", err))
	}
	if conf.AgentSocket == "" {
		conf.AgentSocket = cniserver.DefaultSocket
	}
	if conf.StateDir == "" {
		conf.StateDir = DefaultStateDir
	}
	// Also refuses what no time.Duration holds (conversion would overflow).
	if w := conf.WaitSeconds; w != nil && !(*w >= 0 && *w <= MaxWait.Seconds()) {
		return nil, fmt.Errorf("waitSeconds must be between 0 and %v, got %v", MaxWait.Seconds(), *w)
	}
	if conf.RawPrevResult != nil {
		conf.prev, conf.prevErr = parsePrevResult(&conf.PluginConf)
		conf.prevErr = boundedErr(conf.prevErr)
	}
	return conf, nil
}

// podRef names the Kubernetes Pod a CNI call is for.
type podRef struct {
	Namespace string
	Name      string
	UID       types.UID
}

func (p podRef) String() string { return p.Namespace + "/" + p.Name }

// errNotAPod: CNI_ARGS carry no Pod name, so the sandbox is not a Kubernetes Pod.
var errNotAPod = errors.New("CNI_ARGS name no Kubernetes Pod")

// parsePodArgs reads K8S_POD_NAMESPACE, K8S_POD_NAME and K8S_POD_UID from CNI_ARGS
// ("K1=V1;K2=V2"); every other key is ignored.
func parsePodArgs(args string) (podRef, error) {
	var p podRef
	for pair := range strings.SplitSeq(args, ";") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok {
			return podRef{}, fmt.Errorf("CNI_ARGS: malformed pair %s", quote(pair))
		}
		switch k {
		case "K8S_POD_NAMESPACE":
			p.Namespace = v
		case "K8S_POD_NAME":
			p.Name = v
		case "K8S_POD_UID":
			p.UID = types.UID(v)
		}
	}
	if p.Name == "" {
		return podRef{}, errNotAPod
	}
	if p.Namespace == "" {
		return podRef{}, fmt.Errorf("CNI_ARGS: K8S_POD_NAME %s without K8S_POD_NAMESPACE", quote(p.Name))
	}
	return p, nil
}
