package node

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// certCheckInterval is how often, at most, a handshake looks at the
// certificate files for a change.
const certCheckInterval = time.Second

// certFile serves the control API's TLS certificate from a certificate and
// a key file, and reloads them when either changes (a renewal by an ACME
// client or a secret mount): the next handshake after the change, at most
// a second later, gets the new certificate, while connections already open
// keep theirs. A pair that does not load (a renewal written half-way) is
// logged and the previous certificate kept. It is safe for concurrent use.
type certFile struct {
	certPath, keyPath string
	log               *slog.Logger
	now               func() time.Time

	mu      sync.Mutex // guards the fields below
	cert    *tls.Certificate
	prev    []byte       // the DER of the certificate before cert, if any
	stamp   [2]fileStamp // of the files the current certificate came from
	checked time.Time
}

// fileStamp tells whether a file changed since it was read.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// loadCertFile loads the pair once, failing if it does not load, so that a
// node never starts with a broken certificate.
func loadCertFile(certPath, keyPath string, log *slog.Logger, now func() time.Time) (*certFile, error) {
	c := &certFile{certPath: certPath, keyPath: keyPath, log: log, now: now}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// reload reads the pair and makes it current; c.mu is held or c is not
// shared yet.
func (c *certFile) reload() error {
	cs, err1 := stampOf(c.certPath)
	ks, err2 := stampOf(c.keyPath)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("tls certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		// LoadX509KeyPair never includes the key in its errors.
		return fmt.Errorf("tls certificate %s with key %s: %w", c.certPath, c.keyPath, err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		return fmt.Errorf("tls certificate %s: %w", c.certPath, err)
	}
	cert.Leaf = leaf
	if c.cert != nil {
		c.prev = c.cert.Certificate[0]
	}
	c.cert, c.stamp = &cert, [2]fileStamp{cs, ks}
	c.log.Info("tls certificate loaded", slog.String("path", c.certPath),
		slog.String("subject", leaf.Subject.String()), slog.Time("not_after", leaf.NotAfter))
	return nil
}

// current returns the certificate to serve, reloading it first if the
// files changed since it was read.
func (c *certFile) current() *tls.Certificate {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if now.Sub(c.checked) < certCheckInterval {
		return c.cert
	}
	c.checked = now
	cs, err1 := stampOf(c.certPath)
	ks, err2 := stampOf(c.keyPath)
	if err1 != nil || err2 != nil || (cs == c.stamp[0] && ks == c.stamp[1]) {
		return c.cert
	}
	if err := c.reload(); err != nil {
		c.log.Warn("tls certificate files changed but do not load; serving the previous certificate", slog.Any("error", err))
	}
	return c.cert
}

// serverConfig is the TLS configuration of the control API's listeners.
func (c *certFile) serverConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.current(), nil
		},
	}
}

// selfConfig is the TLS configuration of the REST gateway's connection to
// this node's own gRPC listener: it accepts exactly the certificate this
// node serves (or served until the last reload, for a handshake that
// straddled it), whatever names it carries.
func (c *certFile) selfConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The peer is checked below, against our own certificate: the
		// gateway dials an address the certificate need not name.
		InsecureSkipVerify: true, //nolint:gosec // verified by VerifyPeerCertificate
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			c.mu.Lock()
			own, prev := c.cert.Certificate[0], c.prev
			c.mu.Unlock()
			if len(raw) == 0 || !bytes.Equal(raw[0], own) && !bytes.Equal(raw[0], prev) {
				return errors.New("the gRPC listener does not serve this node's certificate")
			}
			return nil
		},
	}
}
