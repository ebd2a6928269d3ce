package client_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/hookline/hookline/client"
)

// testCA is a CA made for one test, and a server certificate it signed for
// 127.0.0.1, localhost and hookline.test.
type testCA struct {
	pool    *x509.CertPool
	pemFile string
	server  tls.Certificate
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "clienttest CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "hookline"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost", "hookline.test"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return &testCA{pool: pool, pemFile: file, server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// dialTo sends every connection to addr, whatever the client's address
// says: a name that is not loopback, served on loopback.
func dialTo(addr string) grpc.DialOption {
	return grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	})
}

func TestTLS(t *testing.T) {
	ca := newTestCA(t)
	f := startFake(t, nil, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12}))
	plain := startFake(t, nil)
	ev := client.Event{ID: "e1", Type: "a.b", Payload: []byte(`{}`)}
	_, port, _ := net.SplitHostPort(f.addr)
	one := func(cfg client.Config) client.Config { cfg.MaxAttempts = 1; return cfg }

	cases := []struct {
		name string
		cfg  client.Config
		ok   bool
		// errHas is a fragment of the error when the call fails.
		errHas string
	}{
		{name: "CA file", cfg: client.Config{Addr: f.addr, CAFile: ca.pemFile}, ok: true},
		{name: "tls.Config", cfg: client.Config{Addr: f.addr, TLS: &tls.Config{RootCAs: ca.pool}}, ok: true},
		{name: "CA file, a name checked against the certificate", cfg: client.Config{Addr: "passthrough:///hookline.test:" + port, CAFile: ca.pemFile, DialOptions: []grpc.DialOption{dialTo(f.addr)}}, ok: true},
		{name: "a host that is not loopback defaults to TLS with the system's roots", cfg: client.Config{Addr: "passthrough:///hookline.test:" + port, DialOptions: []grpc.DialOption{dialTo(f.addr)}}, errHas: "certificate"},
		{name: "loopback defaults to plaintext", cfg: client.Config{Addr: plain.addr}, ok: true},
		{name: "loopback plaintext to a TLS node fails", cfg: client.Config{Addr: f.addr}, errHas: "unavailable"},
		{name: "plaintext to any host when asked", cfg: client.Config{Addr: "passthrough:///hookline.test:1", Plaintext: true, DialOptions: []grpc.DialOption{dialTo(plain.addr)}}, ok: true},
		{name: "another CA is refused", cfg: client.Config{Addr: f.addr, CAFile: newTestCA(t).pemFile}, errHas: "certificate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := newClient(t, one(tc.cfg)).Publish(ctx, ev)
			if tc.ok && err != nil {
				t.Fatalf("publish: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), tc.errHas)) {
				t.Fatalf("publish: %v, want an error with %q", err, tc.errHas)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  client.Config
	}{
		{name: "plaintext and a CA", cfg: client.Config{Plaintext: true, CAFile: "ca.pem"}},
		{name: "plaintext and TLS", cfg: client.Config{Plaintext: true, TLS: &tls.Config{}}},
		{name: "TLS and a CA file", cfg: client.Config{TLS: &tls.Config{}, CAFile: "ca.pem"}},
		{name: "negative", cfg: client.Config{MaxAttempts: -1}},
		{name: "a token with a line break", cfg: client.Config{Token: "hk_1\r\nX-Evil: 1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.cfg.Validate(); err == nil {
				t.Fatal("Validate accepted it")
			}
			if _, err := client.New(tc.cfg); err == nil {
				t.Fatal("New accepted it")
			}
		})
	}
	t.Run("a CA file that is not PEM", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "ca.pem")
		if err := os.WriteFile(file, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := client.New(client.Config{CAFile: file}); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
			t.Fatalf("New: %v", err)
		}
		if _, err := client.New(client.Config{CAFile: filepath.Join(t.TempDir(), "missing.pem")}); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("New with a missing CA file: %v", err)
		}
	})
	t.Run("the zero value", func(t *testing.T) {
		var cfg client.Config
		if err := cfg.Validate(); err != nil {
			t.Fatal(err)
		}
		c, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if c.Addr() != client.DefaultAddr {
			t.Fatalf("addr %q", c.Addr())
		}
	})
}
