package e2e_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// clock is an injected clock that the test moves forward.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRotationOverlapThroughAPI rotates a secret through the control API of
// a whole node with an injected clock: both secrets are live during the
// overlap, and the old one is retired once it ends.
func TestRotationOverlapThroughAPI(t *testing.T) {
	clk := &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := node.New(ctx, node.Config{
		DataDir: filepath.Join(dir, "n"), GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Cluster:    cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Logger: testLogger()},
		AdminToken: "rot-admin", Policy: &attempt.Policy{AllowPrivate: true}, Now: clk.Now, Logger: testLogger(),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	}()
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	call := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer rot-admin")
	if _, err := controlv1.NewTenantServiceClient(cc).CreateTenant(call, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	eps := controlv1.NewEndpointServiceClient(cc)
	created, err := eps.CreateEndpoint(call, &controlv1.CreateEndpointRequest{TenantId: "acme", EndpointId: "ep_rot",
		Settings: &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/h", EventTypes: []string{"a.b"}}})
	if err != nil {
		t.Fatal(err)
	}
	rot, err := eps.RotateSecret(call, &controlv1.RotateSecretRequest{TenantId: "acme", EndpointId: created.GetEndpoint().GetEndpointId(), OverlapSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if rot.GetSecret() == created.GetSecret() || len(rot.GetEndpoint().GetSecrets()) != 2 {
		t.Fatalf("after rotation: %v", rot.GetEndpoint().GetSecrets())
	}
	get := func() *controlv1.Endpoint {
		ep, err := eps.GetEndpoint(call, &controlv1.GetEndpointRequest{TenantId: "acme", EndpointId: created.GetEndpoint().GetEndpointId()})
		if err != nil {
			t.Fatal(err)
		}
		return ep
	}
	clk.Add(59 * time.Minute)
	if n := len(get().GetSecrets()); n != 2 {
		t.Fatalf("59 min into a 60 min overlap: %d live secrets, want 2", n)
	}
	clk.Add(2 * time.Minute)
	secrets := get().GetSecrets()
	if len(secrets) != 1 || secrets[0].GetVersion() != 2 {
		t.Fatalf("after the overlap: %v, want only version 2", secrets)
	}
}
