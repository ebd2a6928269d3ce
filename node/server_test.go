//go:build !race

// Two nodes in one process race inside protoactor-go (its remote sets
// gRPC's global logger on every start), so the race detector would flag
// them; .ci/run runs this file without -race. Nodes in separate processes
// are tested under -race in node_test.go.

package node_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

const admin = "two-node-admin"

type testServer struct {
	srv    *node.Server
	cancel context.CancelFunc
	done   chan error
	cc     *grpc.ClientConn
}

// openLog opens an embedded log in dir, closed when the test ends: after
// the cleanups of the servers started on it later (they run LIFO).
func openLog(t *testing.T, dir string) *embedded.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(dir, "log")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func startServer(t *testing.T, l *embedded.Log, dir string, seeds ...string) *testServer {
	t.Helper()
	return startServerWith(t, l, dir, nil, seeds...)
}

// startServerWith starts a node on l, with edit applied to its config.
func startServerWith(t *testing.T, l *embedded.Log, dir string, edit func(*node.Config), seeds ...string) *testServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cfg := node.Config{
		DataDir: dir, Log: l, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Cluster:    cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Seeds: seeds, Gossip: fastGossip, Logger: testLogger()},
		AdminToken: admin, MasterKey: "aGVsbG8taG9va2xpbmUtdGVzdC1tYXN0ZXIta2V5ISE=",
		Policy: &attempt.Policy{AllowPrivate: true}, Logger: testLogger(),
	}
	if edit != nil {
		edit(&cfg)
	}
	srv, err := node.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ts := &testServer{srv: srv, cancel: cancel, done: make(chan error, 1)}
	go func() { ts.done <- srv.Run(ctx) }()
	ts.cc, err = grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ts.stop(t) })
	return ts
}

func (ts *testServer) stop(t *testing.T) {
	if ts.cancel == nil {
		return
	}
	ts.cancel()
	ts.cancel = nil
	ts.cc.Close()
	select {
	case err := <-ts.done:
		if err != nil {
			t.Errorf("server stopped with %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("server did not stop within 30 s")
	}
}

func bearer(token string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), cancel
}

// owner returns the address of the member that hosts an endpoint grain.
func owner(ts *testServer, endpointID string) string {
	pid := pcluster.GetCluster(ts.srv.Node().ActorSystem()).Get(endpointID, "endpoint")
	if pid == nil {
		return ""
	}
	return pid.Address
}

// TestTwoNodesShareOneLog runs two nodes with real memberlist on loopback,
// on one embedded log: they form one cluster, spread the endpoint grains,
// answer for every endpoint through either node, and when one stops, the
// other takes its grains back, rebuilt from the log.
func TestTwoNodesShareOneLog(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	a := startServer(t, l, filepath.Join(dir, "a"))
	b := startServer(t, l, filepath.Join(dir, "b"), a.srv.Node().GossipAddress())
	poll(t, 10*time.Second, "both nodes see two members", func() bool {
		return len(a.srv.Node().Members()) == 2 && len(b.srv.Node().Members()) == 2
	})
	// b warms up the partitions it joins for, then a hands them over.
	poll(t, 10*time.Second, "both nodes serve their share", func() bool {
		sa, sb := a.srv.Serving(), b.srv.Serving()
		return sa.Len() > 0 && sb.Len() > 0 && sa.Union(sb).Len() == events.Partitions && sa.Intersect(sb).IsEmpty()
	})

	ctx, cancel := bearer(admin)
	defer cancel()
	if _, err := controlv1.NewTenantServiceClient(a.cc).CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	key, err := controlv1.NewTenantServiceClient(a.cc).IssueApiKey(ctx, &controlv1.IssueApiKeyRequest{TenantId: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	kctx, kcancel := bearer(key.GetApiKey())
	defer kcancel()

	const n = 24
	ids := make([]string, n)
	for i := range ids {
		name := fmt.Sprintf("ep_%02d", i)
		via := a
		if i%2 == 1 {
			via = b
		}
		// b's registry may not have applied the key yet: poll.
		poll(t, 10*time.Second, "create "+name, func() bool {
			created, err := controlv1.NewEndpointServiceClient(via.cc).CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{
				EndpointId: name, Settings: &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/h", EventTypes: []string{"a.b"}},
			})
			ids[i] = created.GetEndpoint().GetEndpointId()
			return err == nil
		})
	}
	// Grains are placed on both members.
	placed := map[string]int{}
	onB := []string{}
	for _, id := range ids {
		addr := owner(a, id)
		if got := owner(b, id); got != addr {
			t.Fatalf("%s: node a says %s, node b says %s", id, addr, got)
		}
		placed[addr]++
		if addr == b.srv.Node().Address() {
			onB = append(onB, id)
		}
	}
	if len(placed) != 2 {
		t.Fatalf("grains placed on %v, want both members", placed)
	}
	t.Logf("placement: %v", placed)
	// Every endpoint answers through either node.
	for _, ts := range []*testServer{a, b} {
		for _, id := range ids {
			ep, err := controlv1.NewEndpointServiceClient(ts.cc).GetEndpoint(kctx, &controlv1.GetEndpointRequest{EndpointId: id})
			if err != nil || ep.GetEndpointId() != id {
				t.Fatalf("get %s through %s: %v", id, ts.srv.GRPCAddr(), err)
			}
		}
	}
	// Change the grains that live on b, so a must rebuild them from the log.
	for _, id := range onB {
		_, err := controlv1.NewEndpointServiceClient(a.cc).PauseEndpoint(kctx, &controlv1.PauseEndpointRequest{EndpointId: id})
		if err != nil {
			t.Fatal(err)
		}
	}
	b.stop(t)
	poll(t, 10*time.Second, "a sees one member", func() bool { return len(a.srv.Node().Members()) == 1 })
	for _, id := range ids {
		ep, err := controlv1.NewEndpointServiceClient(a.cc).GetEndpoint(kctx, &controlv1.GetEndpointRequest{EndpointId: id})
		if err != nil {
			t.Fatalf("get %s after b stopped: %v", id, err)
		}
		if got := owner(a, id); got != a.srv.Node().Address() {
			t.Fatalf("%s lives on %s after b stopped", id, got)
		}
		paused := ep.GetStatus() == controlv1.Endpoint_STATUS_PAUSED
		if wasOnB := contains(onB, id); paused != wasOnB {
			t.Fatalf("%s: paused=%v, want %v (state rebuilt from the log)", id, paused, wasOnB)
		}
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// poll checks cond until it holds or the timeout passes.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, timeout)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
