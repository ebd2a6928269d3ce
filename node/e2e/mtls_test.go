package e2e_test

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookline/hookline/internal/testpki"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestMutualTLSEndToEnd delivers through a node to a receiver on a private
// PKI that requires a client certificate its CA signed: the endpoint that
// presents one (and trusts the receiver through its CA bundle) gets its
// deliveries; the one whose certificate another CA signed gets none, and
// its attempts say why. The client key is never shown.
func TestMutualTLSEndToEnd(t *testing.T) {
	n := startE2E(t, node.Config{})
	c := n.tenant(t, "acme", nil)
	ca, other := testpki.NewCA(t, "receiver ca"), testpki.NewCA(t, "another ca")
	var mu sync.Mutex
	got := map[string]string{} // webhook-id → client certificate's CN
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("webhook-id")] = r.TLS.PeerCertificates[0].Subject.CommonName
		mu.Unlock()
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	create := func(id string, issuer *testpki.CA, types string) {
		t.Helper()
		cert, key := issuer.Client(t, "hookline "+id, time.Now().Add(time.Hour))
		created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: id, Settings: &controlv1.EndpointSettings{
			Url: srv.URL + "/in", EventTypes: []string{types},
			Auth: &controlv1.EndpointAuth{Mtls: &controlv1.MTLSAuth{ClientCertificate: cert, ClientKey: key, CaBundle: ca.PEM}},
		}})
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		if m := created.GetEndpoint().GetSettings().GetAuth().GetMtls(); m.GetClientKey() != "" || !m.GetClientKeySet() || m.GetClientCertificate() != cert {
			t.Fatalf("the created endpoint shows %v", m)
		}
	}
	create("ep_trusted", ca, "order.paid")
	create("ep_stranger", other, "order.shipped")

	var trusted []string
	for i := range 20 {
		trusted = append(trusted, c.publish(t, "paid_"+string(rune('a'+i)), "order.paid")...)
	}
	stranger := c.publish(t, "shipped_1", "order.shipped")
	eventually(t, 30*time.Second, "the trusted endpoint's deliveries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, id := range trusted {
			if got[id] != "hookline ep_trusted" {
				return false
			}
		}
		return true
	})
	eventually(t, 30*time.Second, "the stranger's attempt recorded", func() bool {
		d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: stranger[0]})
		if err != nil || len(d.GetAttempts()) == 0 {
			return false
		}
		a := d.GetAttempts()[0]
		if a.GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_TLS || !strings.Contains(a.GetError(), "certificate required") {
			t.Fatalf("the stranger's attempt: %v %q, want a TLS error saying a client certificate is required", a.GetErrorClass(), a.GetError())
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	if _, ok := got[stranger[0]]; ok {
		t.Error("the receiver accepted the stranger's certificate")
	}
}
