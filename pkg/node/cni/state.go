package cni

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/loutres/juneau/pkg/apis/juneau/v1alpha1"
	"github.com/loutres/juneau/pkg/node/cniserver"
)

// attachmentState is what ADD changed for one container and interface, written before
// the first change so DEL and CHECK know what to undo and verify even after a partial
// ADD. The runtime's cached result cannot serve: it holds juneau's output (the
// ElasticIP), not the primary plugin's addresses DEL must give back.
type attachmentState struct {
	Network     string     `json:"network"`
	ContainerID string     `json:"containerID"`
	IfName      string     `json:"ifName"`
	Namespace   string     `json:"namespace"`
	Pod         string     `json:"pod"`
	UID         string     `json:"uid,omitempty"`
	NICs        []nicState `json:"nics"`
}

// nicState is one direct NIC in the state file.
type nicState struct {
	Interface     string       `json:"interface"`
	ElasticIP     string       `json:"elasticIP"`
	Address       netip.Prefix `json:"address"`
	Primary       bool         `json:"primary,omitempty"`
	HostInterface string       `json:"hostInterface"`
	// ReplacedAddresses are the primary plugin's addresses taken off the primary NIC;
	// DEL puts them back so the primary plugin's own DEL finds what it configured
	// (ptp tears down its masquerade rules by the addresses it finds on the link).
	ReplacedAddresses []netip.Prefix `json:"replacedAddresses,omitempty"`
	Routes            []routeState   `json:"routes,omitempty"`
	Rules             []ruleState    `json:"rules,omitempty"`
}

type routeState struct {
	Dst    netip.Prefix `json:"dst"`
	Gw     netip.Addr   `json:"gw,omitzero"`
	OnLink bool         `json:"onLink,omitempty"`
	Table  int          `json:"table,omitempty"`
}

type ruleState struct {
	From     netip.Prefix `json:"from"`
	Table    int          `json:"table"`
	Priority int          `json:"priority"`
}

func (p nicPlan) state() nicState {
	s := nicState{
		Interface: p.Interface, ElasticIP: p.ElasticIP, Address: p.Address,
		Primary: p.Primary, HostInterface: p.HostInterface,
	}
	for _, r := range p.Routes {
		s.Routes = append(s.Routes, routeState(r))
	}
	for _, r := range p.Rules {
		s.Rules = append(s.Rules, ruleState(r))
	}
	return s
}

func (s nicState) plan() nicPlan {
	p := nicPlan{
		Interface: s.Interface, ElasticIP: s.ElasticIP, Address: s.Address,
		Primary: s.Primary, HostInterface: s.HostInterface,
	}
	for _, r := range s.Routes {
		p.Routes = append(p.Routes, route(r))
	}
	for _, r := range s.Rules {
		p.Rules = append(p.Rules, rule(r))
	}
	return p
}

// stateStore keeps one JSON file per attachment in dir.
type stateStore struct{ dir string }

func (s stateStore) path(containerID, ifName string) (string, error) {
	name := containerID + "-" + ifName
	if containerID == "" || ifName == "" || strings.ContainsAny(name, "/\x00") || strings.HasPrefix(name, ".") {
		return "", fmt.Errorf("cannot name a state file after container %s and interface %s", quote(containerID), quote(ifName))
	}
	return filepath.Join(s.dir, name+".json"), nil
}

// load returns the attachment's state, or nil when ADD changed nothing for it.
func (s stateStore) load(containerID, ifName string) (*attachmentState, error) {
	p, err := s.path(containerID, ifName)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read state %s: %w", p, err)
	}
	st := &attachmentState{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("decode state %s: %w", p, err)
	}
	return st, nil
}

// save writes the state atomically (a crash leaves the old file or the new one).
func (s stateStore) save(st *attachmentState) error {
	p, err := s.path(st.ContainerID, st.IfName)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("create state directory %s: %w", s.dir, err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(s.dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write state %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write state %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write state %s: %w", p, err)
	}
	return nil
}

func (s stateStore) remove(containerID, ifName string) error {
	p, err := s.path(containerID, ifName)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove state %s: %w", p, err)
	}
	return nil
}

// list returns every state in the store (for GC).
func (s stateStore) list() ([]*attachmentState, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list state directory %s: %w", s.dir, err)
	}
	var out []*attachmentState
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if err != nil {
			continue // removed meanwhile by a concurrent DEL
		}
		st := &attachmentState{}
		if json.Unmarshal(b, st) == nil && st.ContainerID != "" {
			out = append(out, st)
		}
	}
	return out, nil
}

func (s nicState) plumbedInterface() cniserver.PlumbedInterface {
	pi := cniserver.PlumbedInterface{
		Interface: s.Interface, ElasticIP: s.ElasticIP, Address: s.Address.String(), HostInterface: s.HostInterface,
	}
	for _, r := range s.Routes {
		ar := v1alpha1.Route{Destination: r.Dst.String(), OnLink: r.OnLink}
		if r.Gw.IsValid() {
			ar.Gateway = r.Gw.String()
		}
		if r.Table != 0 {
			ar.Table = int64(r.Table)
		}
		pi.Routes = append(pi.Routes, ar)
	}
	for _, r := range s.Rules {
		pi.Rules = append(pi.Rules, v1alpha1.RoutingRule{From: r.From.String(), Table: int64(r.Table), Priority: int32(r.Priority)})
	}
	return pi
}

func nicStates(done []plumbed) []nicState {
	out := make([]nicState, 0, len(done))
	for _, p := range done {
		out = append(out, p.state())
	}
	return out
}

// describe lists "interface=address" of plumbed NICs for the log.
func describe(done []plumbed) []string {
	out := make([]string, 0, len(done))
	for _, p := range done {
		out = append(out, p.Interface+"="+p.Address.String())
	}
	return out
}

func podUID(st *attachmentState) types.UID { return types.UID(st.UID) }
