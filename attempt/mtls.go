package attempt

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ClientTLS is an endpoint's mutual TLS: the certificate chain (PEM, leaf
// first) presented to the receiver, its private key (PEM; a secret: never
// log it) and, when not empty, the PEM certificates the receiver's
// certificate must chain to in place of the system's roots. Key names the
// endpoint and its configuration version: the client keeps one transport
// per key.
type ClientTLS struct {
	Key         string
	Certificate string
	PrivateKey  string
	CABundle    string
}

// CheckClientCertificate reports whether cert is a PEM certificate chain
// usable as a client certificate now, and ca (when not empty) a PEM bundle
// of at least one certificate. With key, it also checks that key is the
// leaf's private key.
func CheckClientCertificate(cert, key, ca string, now time.Time) error {
	if key != "" {
		if _, err := tls.X509KeyPair([]byte(cert), []byte(key)); err != nil {
			return fmt.Errorf("the certificate and key are not a PEM certificate and its private key: %v", err)
		}
	}
	leaf, err := leafOf(cert)
	if err != nil {
		return err
	}
	if now.After(leaf.NotAfter) {
		return fmt.Errorf("the client certificate expired on %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if ca != "" && !x509.NewCertPool().AppendCertsFromPEM([]byte(ca)) {
		return errors.New("the CA bundle holds no PEM certificate")
	}
	return nil
}

// leafOf parses the first certificate of a PEM chain.
func leafOf(cert string) (*x509.Certificate, error) {
	der, _ := nextPEMCertificate([]byte(cert))
	if der == nil {
		return nil, errors.New("the client certificate holds no PEM certificate")
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("the client certificate does not parse: %v", err)
	}
	return leaf, nil
}

// clientFor returns the HTTP client of an attempt: the shared one, or
// that of its endpoint's client certificate, made on first use.
func (c *Client) clientFor(t *ClientTLS) (*http.Client, error) {
	if t == nil {
		return c.http, nil
	}
	return c.tlsClients.get(t.Key, func() (*http.Client, error) { return c.newTLSClient(t) })
}

// newTLSClient makes the HTTP client of a client certificate: a transport
// of its own, with the certificate and the CA bundle.
func (c *Client) newTLSClient(t *ClientTLS) (*http.Client, error) {
	conf, err := c.clientTLSConfig(t)
	if err != nil {
		return nil, err
	}
	tr := c.transport.Clone()
	tr.TLSClientConfig = conf
	return &http.Client{Transport: tr, CheckRedirect: c.http.CheckRedirect}, nil
}

// clientTLSConfig is the client's TLS configuration with the endpoint's
// client certificate, and its CA bundle in place of the system roots.
func (c *Client) clientTLSConfig(t *ClientTLS) (*tls.Config, error) {
	pair, err := tls.X509KeyPair([]byte(t.Certificate), []byte(t.PrivateKey))
	if err != nil {
		return nil, &tls.CertificateVerificationError{Err: fmt.Errorf("the endpoint's client certificate and key: %v", err)}
	}
	conf := c.transport.TLSClientConfig.Clone()
	conf.Certificates = []tls.Certificate{pair}
	if t.CABundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(t.CABundle)) {
			return nil, &tls.CertificateVerificationError{Err: errors.New("the endpoint's CA bundle holds no PEM certificate")}
		}
		conf.RootCAs = pool
	}
	return conf, nil
}

// nextPEMCertificate returns the DER bytes of the next CERTIFICATE block
// of rest, and what follows it; nil when there is none.
func nextPEMCertificate(rest []byte) (der, after []byte) {
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, nil
		}
		if b.Type == "CERTIFICATE" {
			return b.Bytes, rest
		}
	}
}
