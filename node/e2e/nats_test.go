package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/internal/brokers"
	"github.com/hookline/hookline/internal/testpki"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// startBroker starts a broker of kind on loopback (internal/brokers),
// killed when the test ends. Without its program the test skips, or fails
// when CI is set (.ci/run installs both).
func startBroker(t *testing.T, kind brokers.Kind, opts ...brokers.Options) *brokers.Server {
	t.Helper()
	var o brokers.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	s, err := brokers.StartWith(context.Background(), kind, t.TempDir(), o)
	switch {
	case errors.Is(err, brokers.ErrNotInstalled) && os.Getenv("CI") == "":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(s.Kill)
	return s
}

// restart starts a killed broker again, on the same port and store.
func restart(t *testing.T, s *brokers.Server) {
	t.Helper()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// waitCircuitOpen waits until the endpoint's circuit is open: its
// attempts failed, and the node holds its deliveries.
func waitCircuitOpen(t *testing.T, c *tenantClient, endpointID, why string) {
	t.Helper()
	eventually(t, 30*time.Second, "the circuit open "+why, func() bool {
		ep, err := c.endpoints.GetEndpoint(c.ctx(), &controlv1.GetEndpointRequest{EndpointId: endpointID})
		return err == nil && ep.GetCircuit() == controlv1.Endpoint_CIRCUIT_OPEN
	})
}

// TestNATSDestination delivers through a node to a NATS JetStream subject:
// every delivery is stored once in the stream, with the delivery id as
// Nats-Msg-Id and the signature headers as message headers, verifiable
// like a webhook; a replay is dropped by the stream as a repeat; with the
// server down until the endpoint's circuit opens, deliveries retry and
// succeed once it is back.
func TestNATSDestination(t *testing.T) {
	ns := startBroker(t, brokers.NATS)
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 200 * time.Millisecond, Cap: time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)

	nc, err := nats.Connect(ns.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}, Duplicates: 10 * time.Minute}); err != nil {
		t.Fatalf("create the stream: %v", err)
	}
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_nats", Settings: &controlv1.EndpointSettings{
		Url: ns.URL() + "/hooks.orders", EventTypes: []string{"order.paid"}, RatePerSecond: 1000, Burst: 100, MaxInFlight: 20,
	}})
	if err != nil {
		t.Fatalf("create the endpoint: %v", err)
	}
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}

	stored := func() map[string]int {
		out := map[string]int{}
		st, err := js.Stream(ctx, "HOOKS")
		if err != nil {
			return out
		}
		info, err := st.Info(ctx)
		if err != nil {
			return out
		}
		for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			id := m.Header.Get(jetstream.MsgIDHeader)
			out[id]++
			if err := wh.Verify(m.Data, http.Header(m.Header)); err != nil {
				t.Errorf("message %d (%s) does not verify: %v", seq, id, err)
			}
		}
		return out
	}
	var ids []string
	for i := range 200 {
		ids = append(ids, c.publish(t, fmt.Sprintf("paid_%03d", i), "order.paid")...)
	}
	all := func(ids []string) func() bool {
		return func() bool {
			got := stored()
			for _, id := range ids {
				if got[id] != 1 {
					return false
				}
			}
			return true
		}
	}
	eventually(t, 60*time.Second, "200 deliveries stored in the stream", all(ids))

	// A replay publishes the same Nats-Msg-Id: the stream drops it.
	if _, err := c.deliveries.ReplayDelivery(c.ctx(), &controlv1.ReplayDeliveryRequest{DeliveryId: ids[0]}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	eventually(t, 30*time.Second, "the replay's attempt recorded", func() bool {
		d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: ids[0]})
		return err == nil && len(d.GetAttempts()) == 2
	})
	if got := stored(); got[ids[0]] != 1 || len(got) != 200 {
		t.Fatalf("after the replay the stream holds %d messages, %d of the replayed delivery; want 200 and 1", len(got), got[ids[0]])
	}

	// The server down until the endpoint's circuit opens on the failed
	// attempts: deliveries wait, and succeed once it is back.
	ns.Kill()
	var during []string
	for i := range 20 {
		during = append(during, c.publish(t, fmt.Sprintf("down_%02d", i), "order.paid")...)
	}
	waitCircuitOpen(t, c, created.GetEndpoint().GetEndpointId(), "while the server is down")
	restart(t, ns)
	eventually(t, 60*time.Second, "the deliveries held while the server was down", all(during))
	if got := stored(); len(got) != 220 {
		t.Errorf("the stream holds %d distinct deliveries, want 220", len(got))
	}
}

// TestNATSToken delivers to a NATS server that requires a token, given in
// the endpoint's URL as token@: the token is sealed, never shown, and
// sent when connecting.
func TestNATSToken(t *testing.T) {
	const token = "tok-3b9d51"
	ns := startBroker(t, brokers.NATS, brokers.Options{NATSToken: token})
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 200 * time.Millisecond, Cap: time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)
	nc, err := nats.Connect(ns.URL(), nats.Token(token))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}})
	if err != nil {
		t.Fatalf("create the stream: %v", err)
	}
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
		Url: "nats://" + token + "@" + ns.Addr() + "/hooks.orders", EventTypes: []string{"order.paid"},
	}})
	if err != nil {
		t.Fatalf("create the endpoint: %v", err)
	}
	if s := created.GetEndpoint().GetSettings(); s.GetUrl() != "nats://"+ns.Addr()+"/hooks.orders" || !s.GetUrlPasswordSet() {
		t.Fatalf("the endpoint shows url %q, url_password_set %v: want no token in the URL, and it set", s.GetUrl(), s.GetUrlPasswordSet())
	}
	for i := range 5 {
		c.publish(t, fmt.Sprintf("tok_%d", i), "order.paid")
	}
	eventually(t, 30*time.Second, "5 messages stored through the token", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 5
	})
}

// TestNATSClientCertificate delivers to a NATS server that requires TLS
// and a client certificate its private CA signed: the endpoint's auth.mtls
// (certificate, key, and the CA bundle it trusts the server by) is
// presented, and its messages are stored; an endpoint without one gets a
// failed attempt that says why.
func TestNATSClientCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "nats ca")
	dir := t.TempDir()
	serverCert, serverKey := ca.ServerPEM(t)
	clientCert, clientKey := ca.Client(t, "hookline", time.Now().Add(time.Hour))
	files := &brokers.TLSFiles{Cert: filepath.Join(dir, "server.pem"), Key: filepath.Join(dir, "server-key.pem"), CA: filepath.Join(dir, "ca.pem")}
	for path, text := range map[string]string{files.Cert: serverCert, files.Key: serverKey, files.CA: ca.PEM,
		filepath.Join(dir, "client.pem"): clientCert, filepath.Join(dir, "client-key.pem"): clientKey} {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ns := startBroker(t, brokers.NATS, brokers.Options{NATSTLS: files})
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 200 * time.Millisecond, Cap: time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)
	nc, err := nats.Connect(ns.URL(), nats.ClientCert(filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")), nats.RootCAs(files.CA))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}})
	if err != nil {
		t.Fatalf("create the stream: %v", err)
	}
	for _, ep := range []struct {
		typ  string
		auth *controlv1.EndpointAuth
	}{
		{"order.paid", &controlv1.EndpointAuth{Mtls: &controlv1.MTLSAuth{ClientCertificate: clientCert, ClientKey: clientKey, CaBundle: ca.PEM}}},
		{"order.refused", nil},
	} {
		if _, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: ns.URL() + "/hooks." + ep.typ, EventTypes: []string{ep.typ}, Auth: ep.auth,
		}}); err != nil {
			t.Fatalf("create the %s endpoint: %v", ep.typ, err)
		}
	}
	for i := range 5 {
		c.publish(t, fmt.Sprintf("tls_%d", i), "order.paid")
	}
	refused := c.publish(t, "no_cert", "order.refused")[0]
	eventually(t, 30*time.Second, "5 messages stored through the client certificate", func() bool {
		info, err := st.Info(ctx)
		return err == nil && info.State.Msgs == 5
	})
	eventually(t, 30*time.Second, "a failed attempt without a client certificate", func() bool {
		d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: refused})
		return err == nil && len(d.GetAttempts()) > 0 && d.GetAttempts()[0].GetError() != ""
	})
	d, _ := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: refused})
	t.Logf("without a certificate: %s", d.GetAttempts()[0].GetError())
}
