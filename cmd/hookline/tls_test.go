package main_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestAPIOverTLS: with --tls-cert and --tls-key, `hookline serve` speaks
// TLS on both API ports; a client that trusts the CA connects, a plaintext
// client does not, the REST gateway still reaches gRPC, and a renewed
// certificate written over the files is served from the next handshake.
func TestAPIOverTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	ca := newTestCA(t)
	certPath, keyPath := filepath.Join(dir, "api.crt"), filepath.Join(dir, "api.key")
	ca.issue(t, 1, certPath, keyPath)
	n := startNode(t, filepath.Join(dir, "data"), "--tls-cert", certPath, "--tls-key", keyPath)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	t.Run("a TLS client connects", func(t *testing.T) {
		cc, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		admin := &api{t: t, n: n, token: adminToken, cc: cc}
		must(admin.tenants().CreateTenant(admin.ctx(), &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}))
	})
	t.Run("a plaintext gRPC client fails", func(t *testing.T) {
		cc, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		admin := &api{t: t, n: n, token: adminToken, cc: cc}
		if _, err := admin.tenants().GetTenant(admin.ctx(), &controlv1.GetTenantRequest{TenantId: "acme"}); err == nil {
			t.Fatal("a plaintext call to the TLS listener succeeded")
		}
	})
	t.Run("a client that does not trust the CA fails", func(t *testing.T) {
		cc, err := grpc.NewClient(n.grpcAddr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{})))
		if err != nil {
			t.Fatal(err)
		}
		defer cc.Close()
		admin := &api{t: t, n: n, token: adminToken, cc: cc}
		if _, err := admin.tenants().GetTenant(admin.ctx(), &controlv1.GetTenantRequest{TenantId: "acme"}); err == nil {
			t.Fatal("a call that cannot verify the node's certificate succeeded")
		}
	})
	t.Run("REST over https reaches gRPC through the gateway", func(t *testing.T) {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		req, _ := http.NewRequest("GET", "https://"+n.httpAddr+"/v1/tenants/acme", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/tenants/acme over https: %d", resp.StatusCode)
		}
		resp, err = http.Get("http://" + n.httpAddr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("plain http to the TLS listener answered 200")
			}
		}
	})
	t.Run("a renewed certificate is served without a restart", func(t *testing.T) {
		// Write the new pair beside the files and rename it over them, as
		// a renewal does.
		newCert, newKey := filepath.Join(dir, "new.crt"), filepath.Join(dir, "new.key")
		ca.issue(t, 2, newCert, newKey)
		for _, p := range [][2]string{{newKey, keyPath}, {newCert, certPath}} {
			if err := os.Rename(p[0], p[1]); err != nil {
				t.Fatal(err)
			}
		}
		serial := waitFor(t, func() (int64, bool) {
			conn, err := tls.Dial("tcp", n.grpcAddr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
			if err != nil {
				return -1, false
			}
			defer conn.Close()
			s := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
			return s, s == 2
		})
		t.Logf("serving certificate serial %d after the renewal", serial)
	})
	t.Run("a renewal that does not load keeps the certificate served", func(t *testing.T) {
		if err := os.WriteFile(certPath, []byte("-----BEGIN CERTIFICATE-----\nnot a certificate\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The files are looked at once a second: two seconds of new
		// handshakes all get serial 2, and the node logs the failure.
		for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			conn, err := tls.Dial("tcp", n.grpcAddr, &tls.Config{RootCAs: pool, NextProtos: []string{"h2"}})
			if err != nil {
				t.Fatalf("handshake after a broken renewal: %v", err)
			}
			s := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
			conn.Close()
			if s != 2 {
				t.Fatalf("serving serial %d, want 2", s)
			}
		}
		if !strings.Contains(n.output(), "tls certificate files changed but do not load") {
			t.Fatalf("the node did not say the renewal failed:\n%s", n.output())
		}
	})
}

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1000),
		Subject:               pkix.Name{CommonName: "hookline test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// issue writes a server certificate for 127.0.0.1 and localhost, with the
// serial given, and its key, as PEM files (the key with mode 0600).
func (ca *testCA) issue(t *testing.T, serial int64, certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: "hookline test node"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
}
