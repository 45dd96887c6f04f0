package admission

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/klog/v2"
)

// fileState identifies one version of a file. Comparing the inode as well as the
// modification time and size catches a swap by rename (how Secret volumes and careful
// writers replace files) even when the new file has the same size and timestamp.
type fileState struct {
	info os.FileInfo
}

func (s fileState) same(info os.FileInfo) bool {
	return s.info != nil && os.SameFile(s.info, info) &&
		s.info.ModTime().Equal(info.ModTime()) && s.info.Size() == info.Size()
}

// CertificateReloader serves a certificate pair from files and loads it again when
// either file changes. It checks the files on every TLS handshake (two stat calls), so
// a rotated certificate is in use from the next connection on, without a restart.
type CertificateReloader struct {
	certFile, keyFile string
	logger            klog.Logger

	mu        sync.Mutex
	cert      *tls.Certificate
	certState fileState
	keyState  fileState
}

// NewCertificateReloader loads the pair once; it fails when the files cannot be read
// or do not form a pair, so a misconfigured server never starts.
func NewCertificateReloader(logger klog.Logger, certFile, keyFile string) (*CertificateReloader, error) {
	r := &CertificateReloader{certFile: certFile, keyFile: keyFile, logger: logger}
	if _, err := r.current(); err != nil {
		return nil, err
	}
	return r, nil
}

// GetCertificate is a tls.Config.GetCertificate.
func (r *CertificateReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.current()
}

// current returns the loaded pair, loading it again when a file changed. A pair that
// cannot be loaded (a writer may have replaced the certificate but not yet the key)
// leaves the previous one in service; it is retried on the next handshake.
func (r *CertificateReloader) current() (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	certInfo, certErr := os.Stat(r.certFile)
	keyInfo, keyErr := os.Stat(r.keyFile)
	if err := errors.Join(certErr, keyErr); err != nil {
		return r.keepOrFail(fmt.Errorf("reading the serving certificate: %w", err))
	}
	if r.cert != nil && r.certState.same(certInfo) && r.keyState.same(keyInfo) {
		return r.cert, nil
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return r.keepOrFail(fmt.Errorf("loading the serving certificate %s and key %s: %w", r.certFile, r.keyFile, err))
	}
	first := r.cert == nil
	r.cert, r.certState, r.keyState = &pair, fileState{certInfo}, fileState{keyInfo}
	if !first {
		r.logger.Info("Loaded a new serving certificate", "certFile", r.certFile, "serial", pair.Leaf.SerialNumber.String(),
			"notAfter", pair.Leaf.NotAfter)
	}
	return r.cert, nil
}

func (r *CertificateReloader) keepOrFail(err error) (*tls.Certificate, error) {
	if r.cert == nil {
		return nil, err
	}
	r.logger.V(2).Info("Keeping the previous serving certificate", "err", err)
	return r.cert, nil
}
