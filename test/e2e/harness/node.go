package harness

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/loutres/juneau/test/framework"
)

var servingAddr = regexp.MustCompile(`Serving metrics and health.*address="([^"]+)"`)

// Metrics returns the agent's /metrics, read inside the Node's namespace from the
// address the running agent logged.
func (n *Node) Metrics(ctx context.Context) (string, error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second}
	return scrape(ctx, n.Agent, func(ctx context.Context, network, address string) (conn net.Conn, err error) {
		err = n.NS.Do(func() (err error) {
			conn, err = dialer.DialContext(ctx, network, address)
			return err
		})
		return conn, err
	})
}

// ControllerMetrics returns the controller's /metrics.
func (c *Cluster) ControllerMetrics(ctx context.Context) (string, error) {
	return scrape(ctx, c.Controller, (&net.Dialer{Timeout: 2 * time.Second}).DialContext)
}

// scrape reads /metrics of a component at the address it logged, dialing with dial.
func scrape(ctx context.Context, comp *framework.Component, dial func(ctx context.Context, network, address string) (net.Conn, error)) (string, error) {
	m := servingAddr.FindStringSubmatch(comp.Log())
	if m == nil {
		return "", fmt.Errorf("%s has not logged its metrics address yet", comp.Name)
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true, DialContext: dial}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+m[1]+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET /metrics of %s: %s", comp.Name, resp.Status)
	}
	return string(b), err
}

// MetricValue reads the value of one series (`name{labels}` exactly as exposed) from
// Prometheus text.
func MetricValue(text, series string) (float64, bool) {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, err == nil
		}
	}
	return 0, false
}

// NftGeneration is the nftables ruleset generation of the Node's namespace: it grows
// by one per committed transaction, whoever commits it.
func (n *Node) NftGeneration() (uint32, error) {
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: n.NS.FD()})
	if err != nil {
		return 0, fmt.Errorf("netlink in %s: %w", n.Name, err)
	}
	defer c.Close()
	msgs, err := c.Execute(netlink.Message{
		Header: netlink.Header{Type: netlink.HeaderType(unix.NFNL_SUBSYS_NFTABLES<<8 | unix.NFT_MSG_GETGEN), Flags: netlink.Request},
		Data:   []byte{unix.AF_UNSPEC, unix.NFNETLINK_V0, 0, 0},
	})
	if err != nil {
		return 0, fmt.Errorf("GETGEN in %s: %w", n.Name, err)
	}
	for _, m := range msgs {
		if len(m.Data) < 4 {
			continue
		}
		ad, err := netlink.NewAttributeDecoder(m.Data[4:])
		if err != nil {
			return 0, err
		}
		ad.ByteOrder = binary.BigEndian
		for ad.Next() {
			if ad.Type() == unix.NFTA_GEN_ID {
				return ad.Uint32(), nil
			}
		}
	}
	return 0, fmt.Errorf("GETGEN in %s: no generation in the answer", n.Name)
}
