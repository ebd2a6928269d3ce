package attempt_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/internal/testpki"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestMutualTLS: a receiver on a private PKI that requires a client
// certificate from its CA accepts an attempt that presents one and trusts
// the receiver through the endpoint's CA bundle; without the certificate,
// or with one from another CA, the attempt fails with a TLS error that
// says so.
func TestMutualTLS(t *testing.T) {
	ca, other := testpki.NewCA(t, "receiver ca"), testpki.NewCA(t, "someone else")
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	c := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{AllowPrivate: true}})
	t.Cleanup(c.CloseIdleConnections)

	cert, key := ca.Client(t, "hookline ep_1", time.Now().Add(time.Hour))
	do := func(tl *attempt.ClientTLS) attempt.Outcome {
		req := testRequest(srv.URL)
		req.TLS = tl
		return c.Do(context.Background(), req)
	}
	if o := do(&attempt.ClientTLS{Key: "ep_1/1", Certificate: cert, PrivateKey: key, CABundle: ca.PEM}); o.Status != http.StatusOK {
		t.Fatalf("with the client certificate: %d %v %s", o.Status, o.ErrorClass, o.Error)
	}
	if len(seen) != 1 || seen[0] != "hookline ep_1" {
		t.Fatalf("the receiver saw client certificates %v", seen)
	}

	// Without the bundle the receiver's private CA is unknown.
	if o := do(&attempt.ClientTLS{Key: "ep_1/2", Certificate: cert, PrivateKey: key}); o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TLS || !strings.Contains(o.Error, "certificate") {
		t.Errorf("without the CA bundle: %v %q, want a TLS error about the certificate", o.ErrorClass, o.Error)
	}
	// Without a client certificate, or with another CA's, the receiver
	// refuses the handshake.
	otherCert, otherKey := other.Client(t, "stranger", time.Now().Add(time.Hour))
	for name, tl := range map[string]*attempt.ClientTLS{
		"no client certificate":    {Key: "ep_2/1", CABundle: ca.PEM},
		"another CA's certificate": {Key: "ep_3/1", Certificate: otherCert, PrivateKey: otherKey, CABundle: ca.PEM},
	} {
		if tl.Certificate == "" {
			// A bundle without a certificate: trust through the client's
			// base configuration instead.
			cc := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{AllowPrivate: true}, TLSConfig: &tls.Config{RootCAs: ca.Pool()}})
			o := cc.Do(context.Background(), testRequest(srv.URL))
			cc.CloseIdleConnections()
			t.Logf("%s: %s", name, o.Error)
			if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TLS || !strings.Contains(o.Error, "certificate") {
				t.Errorf("%s: %v %q, want a TLS error about the certificate", name, o.ErrorClass, o.Error)
			}
			continue
		}
		o := do(tl)
		if o.ErrorClass != hooklinev1.ErrorClass_ERROR_CLASS_TLS || !strings.Contains(o.Error, "certificate") {
			t.Errorf("%s: %v %q, want a TLS error about the certificate", name, o.ErrorClass, o.Error)
		}
		t.Logf("%s: %s", name, o.Error)
	}
	if len(seen) != 1 {
		t.Errorf("the receiver answered %d requests, want only the first", len(seen))
	}
}

func TestCheckClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "ca")
	now := time.Now()
	cert, key := ca.Client(t, "c", now.Add(time.Hour))
	_, otherKey := ca.Client(t, "d", now.Add(time.Hour))
	expired, expiredKey := ca.Client(t, "e", now.Add(-time.Minute))
	for _, tc := range []struct {
		name, cert, key, ca, want string
	}{
		{"good", cert, key, ca.PEM, ""},
		{"kept key", cert, "", "", ""},
		{"another key", cert, otherKey, "", "not a PEM certificate and its private key"},
		{"not PEM", "hello", "", "", "holds no PEM certificate"},
		{"expired", expired, expiredKey, "", "expired"},
		{"bad bundle", cert, key, "nothing", "CA bundle holds no PEM certificate"},
	} {
		err := attempt.CheckClientCertificate(tc.cert, tc.key, tc.ca, now)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
