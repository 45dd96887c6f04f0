package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Lifetimes of what the provisioner issues. Either is renewed once less than a third of
// its lifetime is left, so a webhook checking hourly never serves an expired one.
const (
	CAValidity      = 10 * 365 * 24 * time.Hour
	ServingValidity = 365 * 24 * time.Hour
	// clockSkew backdates NotBefore so a client whose clock lags still accepts.
	clockSkew = 5 * time.Minute
)

// pair is a PEM certificate and its PEM private key.
type pair struct {
	cert, key []byte
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating a key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding a key: %w", err)
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("drawing a serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil // never zero
}

// newCA makes a self-signed CA named after the Secret it lives in.
func newCA(name string, now time.Time) (pair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return pair{}, err
	}
	serial, err := serialNumber()
	if err != nil {
		return pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: name + "-ca@" + fmt.Sprint(now.Unix())},
		NotBefore:             now.Add(-clockSkew),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return pair{}, fmt.Errorf("creating the CA certificate: %w", err)
	}
	return pair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM}, nil
}

// issueServing signs a serving certificate for hosts (DNS names or IP addresses).
func issueServing(ca *x509.Certificate, caKey crypto.Signer, hosts []string, now time.Time) (pair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return pair{}, err
	}
	serial, err := serialNumber()
	if err != nil {
		return pair{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: hosts[0]},
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(ServingValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return pair{}, fmt.Errorf("signing the serving certificate: %w", err)
	}
	return pair{cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: keyPEM}, nil
}

// parseCerts decodes every CERTIFICATE block of a PEM bundle.
func parseCerts(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parsing a certificate: %w", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no certificate found")
	}
	return out, nil
}

// parseSigner decodes a PKCS#8, EC or PKCS#1 private key.
func parseSigner(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		if s, ok := k.(crypto.Signer); ok {
			return s, nil
		}
		return nil, errors.New("the private key cannot sign")
	}
	if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("unsupported private key format")
}

// expiresSoon reports whether less than a third of the certificate's lifetime is left.
func expiresSoon(c *x509.Certificate, now time.Time) bool {
	lifetime := c.NotAfter.Sub(c.NotBefore)
	return c.NotAfter.Sub(now) < lifetime/3
}

// servingProblem says why the serving pair cannot stay, or "".
func servingProblem(p pair, ca *x509.Certificate, hosts []string, now time.Time) string {
	certs, err := parseCerts(p.cert)
	if err != nil {
		return "the serving certificate cannot be read: " + err.Error()
	}
	leaf := certs[0]
	key, err := parseSigner(p.key)
	if err != nil {
		return "the serving key cannot be read: " + err.Error()
	}
	if pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool }); !ok || !pub.Equal(leaf.PublicKey) {
		return "the serving key does not match the certificate"
	}
	if err := leaf.CheckSignatureFrom(ca); err != nil {
		return "the serving certificate is not signed by the current CA"
	}
	if expiresSoon(leaf, now) {
		return fmt.Sprintf("the serving certificate expires soon (%s)", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	for _, h := range hosts {
		if err := leaf.VerifyHostname(h); err != nil {
			return fmt.Sprintf("the serving certificate does not cover %q", h)
		}
	}
	return ""
}

// caBundle puts the current CA first and keeps earlier CAs until they expire, so
// replicas still serving a certificate of the previous CA stay trusted while they catch up.
func caBundle(current []byte, previous []*x509.Certificate, now time.Time) []byte {
	out := slices.Clone(current)
	for _, c := range previous {
		enc := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
		if now.Before(c.NotAfter) && !bytes.Contains(out, enc) {
			out = append(out, enc...)
		}
	}
	return out
}
