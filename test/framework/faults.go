package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Faults of the control plane, for tests of what juneau does while its API server or
// etcd is away. Each stopped component starts again with the command line it had, on
// the same ports and with the same data, certificates and keys, so clients reconnect
// to it as to a restarted server; its new log is kube-apiserver-<n>.log (etcd-<n>.log).

// StopAPIServer stops kube-apiserver (SIGTERM, as a server being restarted gets).
func (cp *ControlPlane) StopAPIServer() {
	cp.apiserver.stop(30 * time.Second)
}

// StartAPIServer starts the stopped kube-apiserver again and waits until it is ready.
func (cp *ControlPlane) StartAPIServer(ctx context.Context) error {
	if done, _ := cp.apiserver.exited(); !done {
		return fmt.Errorf("kube-apiserver is running")
	}
	cp.restarts++
	return cp.runAPIServer(ctx)
}

// RestartEtcd stops etcd (SIGTERM), starts it again on its data and waits until it is
// healthy; kube-apiserver stays up and reconnects.
func (cp *ControlPlane) RestartEtcd(ctx context.Context) error {
	cp.etcd.stop(30 * time.Second)
	cp.restarts++
	return cp.runEtcd(ctx)
}

// EtcdRevision is etcd's current revision: every write anywhere raises it, and
// resourceVersions are revisions.
func (cp *ControlPlane) EtcdRevision(ctx context.Context) (int64, error) {
	var out struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	// The smallest range request: key "\x00", no value wanted.
	if err := cp.etcdCall(ctx, "/v3/kv/range", map[string]any{"key": "AA==", "count_only": true}, &out); err != nil {
		return 0, err
	}
	return strconv.ParseInt(out.Header.Revision, 10, 64)
}

// CompactEtcd discards etcd's history before revision rev (and physically frees it):
// a watch that resumes from an older revision is then refused as compacted, which
// kube-apiserver reports as "too old resource version".
func (cp *ControlPlane) CompactEtcd(ctx context.Context, rev int64) error {
	return cp.etcdCall(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil)
}

// etcdCall posts a request to etcd's JSON gateway of its v3 API.
func (cp *ControlPlane) etcdCall(ctx context.Context, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cp.etcdURL+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, data)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(data, out)
}

// APIServerPID is the process id of the running kube-apiserver.
func (cp *ControlPlane) APIServerPID() int { return cp.apiserver.cmd.Process.Pid }

// EtcdPID is the process id of the running etcd.
func (cp *ControlPlane) EtcdPID() int { return cp.etcd.cmd.Process.Pid }
