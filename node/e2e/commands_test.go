package e2e_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// slowResolver answers every lookup with 127.0.0.1 after delay: a DNS
// server slower than the node's request timeout (the injected resolver at
// the process boundary).
type slowResolver struct{ delay time.Duration }

func (r slowResolver) LookupIPAddr(ctx context.Context, _ string) ([]net.IPAddr, error) {
	t := time.NewTimer(r.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return []net.IPAddr{{IP: net.IPv4(127, 0, 0, 1)}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestSlowCreateRunsOnce: an endpoint creation whose URL check (DNS) takes
// longer than the node's request timeout creates the endpoint once and
// answers with its secret. The node repeats the timed-out request; the
// grain answers the repeat from the EndpointCreated its first run wrote
// (same request id), with the secret opened again from its sealed copy,
// instead of ALREADY_EXISTS and a secret nobody was shown.
func TestSlowCreateRunsOnce(t *testing.T) {
	n := startE2E(t, node.Config{
		Policy: &attempt.Policy{AllowPrivate: true, Resolver: slowResolver{delay: cluster.DefaultRequestTimeout + 500*time.Millisecond}},
	})
	c := n.tenant(t, "acme", nil)
	start := time.Now()
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_slow", Settings: &controlv1.EndpointSettings{
		Url: "https://slow.example.com/in", EventTypes: []string{"*"},
	}})
	if err != nil {
		t.Fatalf("create endpoint (took %v): %v", time.Since(start), err)
	}
	t.Logf("create took %v", time.Since(start))
	if !strings.HasPrefix(created.GetSecret(), attempt.SecretPrefix) || created.GetEndpoint().GetConfigVersion() != 1 {
		t.Fatalf("create answered %v, want the endpoint and its secret", created)
	}
	id := created.GetEndpoint().GetEndpointId() // the chosen id with its tenant's tag
	recs, err := n.srv.Log().ReadStream(t.Context(), events.EndpointStream(id), events.Forwards, 0, 10)
	if err != nil || len(recs) != 1 || recs[0].Type != "EndpointCreated" {
		t.Fatalf("endpoint stream: %d events (%v), want one EndpointCreated", len(recs), err)
	}
	// The secret answered is the endpoint's: a rotation overlap lists it as
	// version 1, the only version.
	ep, err := c.endpoints.GetEndpoint(c.ctx(), &controlv1.GetEndpointRequest{EndpointId: id})
	if err != nil {
		t.Fatal(err)
	}
	if s := ep.GetSecrets(); len(s) != 1 || s[0].GetVersion() != 1 {
		t.Fatalf("secrets %v", s)
	}
}
