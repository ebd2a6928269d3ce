package e2e_test

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/internal/testpki"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// rotatingReceiver accepts a delivery only with credentials it currently
// trusts: a client certificate by common name, a bearer token issued for
// a client secret it trusts, and an X-Api-Key value. It issues the tokens
// too, to clients with a trusted secret.
type rotatingReceiver struct {
	mu      sync.Mutex
	trusted map[string]bool // "cn:…", "secret:…", "key:…"
	tokens  map[string]string
	got     map[string]string // webhook-id → the credentials of its accepted request
	refused int
}

func (r *rotatingReceiver) trust(creds ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.trusted = map[string]bool{}
	for _, c := range creds {
		r.trusted[c] = true
	}
}

func (r *rotatingReceiver) token(w http.ResponseWriter, req *http.Request) {
	_, secret, _ := req.BasicAuth()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.trusted["secret:"+secret] {
		http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
		return
	}
	tok := fmt.Sprintf("tok-%d", len(r.tokens))
	r.tokens[tok] = secret
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":60}`, tok)
}

func (r *rotatingReceiver) receive(w http.ResponseWriter, req *http.Request) {
	cn := req.TLS.PeerCertificates[0].Subject.CommonName
	tok, _ := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	key := req.Header.Get("X-Api-Key")
	r.mu.Lock()
	defer r.mu.Unlock()
	secret, issued := r.tokens[tok]
	if !r.trusted["cn:"+cn] || !issued || !r.trusted["secret:"+secret] || !r.trusted["key:"+key] {
		r.refused++
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	r.got[req.Header.Get("webhook-id")] = cn + "/" + secret + "/" + key
}

func (r *rotatingReceiver) received(ids []string) (n int, creds map[string]int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	creds = map[string]int{}
	for _, id := range ids {
		if c, ok := r.got[id]; ok {
			n++
			creds[c]++
		}
	}
	return n, creds
}

// TestCredentialRotationUnderLoad rotates an endpoint's client
// certificate, OAuth2 client secret and secret header in one update while
// its deliveries flow (50/s): the receiver trusts old and new until it sees the
// new ones, then only the new. Every delivery arrives, and every one
// accepted after the switch carried the new credentials.
func TestCredentialRotationUnderLoad(t *testing.T) {
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 200 * time.Millisecond, Cap: time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)
	ca := testpki.NewCA(t, "receiver ca")
	r := &rotatingReceiver{tokens: map[string]string{}, got: map[string]string{}}
	r.trust("cn:hookline a", "secret:s1", "key:k1")
	mux := http.NewServeMux()
	mux.HandleFunc("/token", r.token)
	mux.HandleFunc("/in", r.receive)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t)}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool()}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	certA, keyA := ca.Client(t, "hookline a", time.Now().Add(time.Hour))
	certB, keyB := ca.Client(t, "hookline b", time.Now().Add(time.Hour))
	auth := func(cert, key, secret string) *controlv1.EndpointAuth {
		return &controlv1.EndpointAuth{
			Mtls:   &controlv1.MTLSAuth{ClientCertificate: cert, ClientKey: key, CaBundle: ca.PEM},
			Oauth2: &controlv1.OAuth2Auth{TokenUrl: srv.URL + "/token", ClientId: "hookline", ClientSecret: secret},
		}
	}
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
		Url: srv.URL + "/in", EventTypes: []string{"order.paid"}, RatePerSecond: 50, Burst: 5, MaxInFlight: 10,
		Auth: auth(certA, keyA, "s1"), SecretHeaders: map[string]string{"X-Api-Key": "k1"},
	}})
	if err != nil {
		t.Fatalf("create the endpoint: %v", err)
	}
	// Two calls, so that the rotation below comes while most of them wait
	// for the endpoint's rate (50/s: 3 s of work).
	before := append(c.publishBatch(t, "before", 0, 100, "order.paid"), c.publishBatch(t, "before", 100, 50, "order.paid")...)
	// The receiver's side of a planned rotation: old and new trusted.
	r.trust("cn:hookline a", "secret:s1", "key:k1", "cn:hookline b", "secret:s2", "key:k2")
	if _, err := c.endpoints.UpdateEndpoint(c.ctx(), &controlv1.UpdateEndpointRequest{
		EndpointId: created.GetEndpoint().GetEndpointId(),
		Settings:   &controlv1.EndpointSettings{Auth: auth(certB, keyB, "s2"), SecretHeaders: map[string]string{"X-Api-Key": "k2"}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"auth", "secret_headers"}},
	}); err != nil {
		t.Fatalf("rotate: %v", err)
	}
	if n, _ := r.received(before); n == len(before) {
		t.Fatal("every delivery arrived before the rotation: the test rotates nothing under load")
	}
	const fresh = "hookline b/s2/k2"
	eventually(t, 30*time.Second, "a delivery with the new credentials", func() bool {
		_, creds := r.received(before)
		return creds[fresh] > 0
	})
	r.trust("cn:hookline b", "secret:s2", "key:k2") // the old ones withdrawn
	switched := map[string]bool{}
	r.mu.Lock()
	for id := range r.got {
		switched[id] = true // accepted before the switch
	}
	r.mu.Unlock()
	after := append(c.publishBatch(t, "after", 0, 100, "order.paid"), c.publishBatch(t, "after", 100, 50, "order.paid")...)
	all := append(append([]string{}, before...), after...)
	eventually(t, 60*time.Second, "all 300 deliveries", func() bool {
		n, _ := r.received(all)
		return n == len(all)
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range all {
		if !switched[id] && r.got[id] != fresh {
			t.Errorf("delivery %s was accepted after the switch with %q, want %q", id, r.got[id], fresh)
		}
	}
	t.Logf("300 delivered; %d accepted before the switch; %d requests refused with withdrawn credentials (retried)", len(switched), r.refused)
}
