package admission

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2/ktesting"
)

// selfSigned makes a certificate for 127.0.0.1 that is its own CA, with the given serial.
func selfSigned(t *testing.T, serial int64) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(serial),
		Subject:               pkix.Name{CommonName: "webhook-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), cert
}

// replaceFile swaps a file by rename, as a Secret volume or careful writer does.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestServer(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, keyPEM, first := selfSigned(t, 1001)
	replaceFile(t, certFile, certPEM)
	replaceFile(t, keyFile, keyPEM)

	f := newFixture(t)
	var ready atomic.Bool
	srv := NewServer(ServerConfig{BindAddress: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile}, f.handler, ready.Load)
	addr, err := srv.Listen()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()

	roots := x509.NewCertPool()
	roots.AddCert(first)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	base := "https://" + addr.String()
	get := func(path string) int {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := get(PathHealthz); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	if code := get(PathReadyz); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz before sync: %d, want 503", code)
	}
	ready.Store(true)
	if code := get(PathReadyz); code != http.StatusOK {
		t.Errorf("/readyz after sync: %d", code)
	}

	// A review over TLS.
	req := request(t, admissionv1.Create, pool("p", arp, "10.225.51.1/24"), nil)
	resp, err := client.Post(base+PathJuneau, "application/json",
		bytes.NewReader(mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: reviewTypeMeta(), Request: req})))
	if err != nil {
		t.Fatal(err)
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if review.Response == nil || review.Response.Allowed || review.Response.UID != req.UID {
		t.Errorf("review over TLS: %+v", review.Response)
	}
	// Connection: close, so the API server keeps no idle connection to this replica
	// (docs/operations.md#a-node-dies).
	if !resp.Close {
		t.Error("the review's response keeps its connection open, want Connection: close")
	}

	// A client offering HTTP/2 first, as the API server does, is served HTTP/1.1: each
	// review that times out takes its own connection with it (docs/operations.md#a-node-dies).
	conn, err := tls.Dial("tcp", addr.String(), &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := conn.ConnectionState().NegotiatedProtocol; got != "http/1.1" {
		t.Errorf("negotiated %q with a client offering h2, want http/1.1", got)
	}
	conn.Close()

	// Rotation: the next handshake presents the new certificate.
	certPEM, keyPEM, second := selfSigned(t, 2002)
	replaceFile(t, keyFile, keyPEM)
	replaceFile(t, certFile, certPEM)
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return servedSerial(t, addr.String()) == second.SerialNumber.Int64(), nil
	})
	if err != nil {
		t.Fatalf("the rotated certificate was never served; serial is %d", servedSerial(t, addr.String()))
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := net.DialTimeout("tcp", addr.String(), time.Second); err == nil {
		t.Error("still listening after shutdown")
	}
}

// servedSerial dials the server and returns the serial of the certificate it presents.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only the serial is read
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestServerFailsWithoutCertificate(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	srv := NewServer(ServerConfig{BindAddress: "127.0.0.1:0", CertFile: filepath.Join(dir, "no.crt"), KeyFile: filepath.Join(dir, "no.key")},
		newFixture(t).handler, nil)
	if err := srv.Run(ctx); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Run = %v, want a missing-file error", err)
	}
}

func TestCertificateReloaderKeepsAWorkingPair(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	certPEM, keyPEM, _ := selfSigned(t, 1)
	replaceFile(t, certFile, certPEM)
	replaceFile(t, keyFile, keyPEM)
	r, err := NewCertificateReloader(logger, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	serial := func() int64 {
		t.Helper()
		c, err := r.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		return c.Leaf.SerialNumber.Int64()
	}
	// Half a rotation: a new certificate with the old key does not load.
	newCert, newKey, _ := selfSigned(t, 2)
	replaceFile(t, certFile, newCert)
	if got := serial(); got != 1 {
		t.Errorf("mismatched pair: serving serial %d, want the previous 1", got)
	}
	replaceFile(t, keyFile, newKey)
	if got := serial(); got != 2 {
		t.Errorf("completed rotation: serving serial %d, want 2", got)
	}
	if err := os.Remove(certFile); err != nil {
		t.Fatal(err)
	}
	if got := serial(); got != 2 {
		t.Errorf("file removed: serving serial %d, want 2 kept", got)
	}
	replaceFile(t, certFile, []byte("garbage"))
	if got := serial(); got != 2 {
		t.Errorf("garbage file: serving serial %d, want 2 kept", got)
	}
}
