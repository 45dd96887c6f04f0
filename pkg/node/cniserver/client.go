package cniserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"

	"k8s.io/apimachinery/pkg/types"
)

// Client is the plugin's side of the socket.
type Client struct {
	socket string
	http   *http.Client
}

// NewClient returns a client for the agent listening on socketPath.
func NewClient(socketPath string) *Client {
	d := &net.Dialer{}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", socketPath)
		},
		DisableKeepAlives: true,
	}
	return &Client{socket: socketPath, http: &http.Client{Transport: tr}}
}

// StatusError is a non-2xx answer of the agent.
type StatusError struct {
	Status  int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("node agent answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Retryable reports whether asking again may succeed: anything but a malformed request
// or a caller the agent refuses to serve.
func (e *StatusError) Retryable() bool {
	return e.Status != http.StatusBadRequest && e.Status != http.StatusForbidden
}

// IsRetryable reports whether err (from a Client call) may go away on a later call:
// connection failures (agent restarting) and answers other than 400 and 403.
func IsRetryable(err error) bool {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable()
	}
	return err != nil
}

// Interfaces asks for the Pod's direct NICs.
func (c *Client) Interfaces(ctx context.Context, namespace, pod string, uid types.UID) ([]Interface, error) {
	q := url.Values{"namespace": {namespace}, "pod": {pod}}
	if uid != "" {
		q.Set("uid", string(uid))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://juneau"+PathInterfaces+"?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	var out InterfacesResponse
	if err := c.do(req, &out); err != nil {
		return nil, err
	}
	return out.Interfaces, nil
}

// Plumbed reports a successful ADD.
func (c *Client) Plumbed(ctx context.Context, p Plumbing) error {
	return c.post(ctx, PathPlumbed, p)
}

// Unplumbed reports a DEL.
func (c *Client) Unplumbed(ctx context.Context, p Plumbing) error {
	return c.post(ctx, PathUnplumbed, p)
}

func (c *Client) post(ctx context.Context, path string, p Plumbing) error {
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://juneau"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	return c.do(req, nil)
}

func (c *Client) do(req *http.Request, out any) error {
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("node agent at %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return fmt.Errorf("node agent at %s: read answer: %w", c.socket, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorResponse
		msg := string(bytes.TrimSpace(body))
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		return &StatusError{Status: resp.StatusCode, Message: msg}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("node agent at %s: decode answer: %w", c.socket, err)
	}
	return nil
}
