package clienttest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// AdminToken is the admin token of every node this package starts.
const AdminToken = "clienttest-admin-token"

const masterKey = "aGVsbG8taG9va2xpbmUtdGVzdC1tYXN0ZXIta2V5ISE=" // 32 bytes

// Node is a Hookline node running in this process.
type Node struct {
	// Addr is the node's gRPC address.
	Addr string
	// Dir is the node's data directory.
	Dir string

	srv  *node.Server
	stop context.CancelFunc
	done chan error
}

// Options adjust a node; the zero value is a fresh node on ports the
// system chooses.
type Options struct {
	// Dir reuses a data directory (a restart); empty means a new one.
	Dir string
	// GRPCAddr binds the gRPC API there (a restart on the same address);
	// empty means a port the system chooses.
	GRPCAddr string
	// MaxInFlightPerCaller bounds each caller's calls in flight (see
	// node.Config); 0 means the node's default.
	MaxInFlightPerCaller int
}

// Start starts a node, waits until it serves, and stops it at the end of
// the test (unless Stop did already).
func Start(t testing.TB, opts Options) *Node {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = filepath.Join(t.TempDir(), "node")
	}
	n, err := Run(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(t) })
	return n
}

// Run starts a node outside a test (an Example): the caller stops it with
// Close. Options.Dir is required.
func Run(opts Options) (*Node, error) {
	if opts.Dir == "" {
		return nil, errors.New("clienttest: Options.Dir is required")
	}
	addr := opts.GRPCAddr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	cfg := node.Config{
		DataDir: opts.Dir, GRPCAddr: addr, HTTPAddr: "127.0.0.1:0",
		Cluster:    cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Logger: Logger()},
		AdminToken: AdminToken, MasterKey: masterKey,
		Policy: &attempt.Policy{AllowPrivate: true},
		// Out of the way of load tests: the default tenant quota is 100
		// attempts per second.
		TenantAttemptsPerSecond: 100000, TenantMaxInFlight: 1000,
		MaxInFlightPerCaller: opts.MaxInFlightPerCaller,
		Logger:               Logger(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := node.New(ctx, cfg)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("clienttest: start node: %w", err)
	}
	n := &Node{Addr: srv.GRPCAddr(), Dir: opts.Dir, srv: srv, stop: cancel, done: make(chan error, 1)}
	go func() { n.done <- srv.Run(ctx) }()
	return n, nil
}

// Server returns the running server.
func (n *Node) Server() *node.Server { return n.srv }

// Stop stops the node gracefully and waits for it, failing the test if it
// does not stop cleanly; stopping twice is a no-op.
func (n *Node) Stop(t testing.TB) {
	t.Helper()
	if err := n.Close(); err != nil {
		t.Error(err)
	}
}

// Close stops the node gracefully and waits for it, at most a minute;
// closing twice is a no-op.
func (n *Node) Close() error {
	if n.stop == nil {
		return nil
	}
	n.stop()
	n.stop = nil
	select {
	case err := <-n.done:
		if err != nil {
			return fmt.Errorf("clienttest: node stopped with %w", err)
		}
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("clienttest: node did not stop within 60 s")
	}
}

// Client returns a client of the node with token, closed at the end of the
// test. cfg, if given, sets the rest (retries, batch limits); its Addr and
// Token are overwritten.
func (n *Node) Client(t testing.TB, token string, cfg ...client.Config) *client.Client {
	t.Helper()
	var c client.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	c.Addr, c.Token = n.Addr, token
	cl, err := client.New(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// Tenant creates a tenant with a quota out of the way of load tests, and
// returns one of its API keys.
func (n *Node) Tenant(t testing.TB, id string) string {
	t.Helper()
	admin := n.Client(t, AdminToken)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	quota := &hooklinev1.Quota{AttemptsPerSecond: 100000, MaxInFlight: 1000}
	if _, err := admin.CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: id, Name: id, Quota: quota}); err != nil {
		t.Fatalf("create tenant %s: %v", id, err)
	}
	key, err := admin.IssueAPIKey(ctx, &controlv1.IssueApiKeyRequest{TenantId: id, Name: "clienttest"})
	if err != nil {
		t.Fatalf("issue key for %s: %v", id, err)
	}
	return key.GetApiKey()
}

// Published counts the EventPublished events of tenant in the node's log,
// by event id (see PublishedIn).
func (n *Node) Published(t testing.TB, tenant string) map[string]int {
	t.Helper()
	return PublishedIn(t, n.srv.Log(), tenant)
}

// PublishedIn counts the EventPublished events of tenant in log, by event
// id: what Hookline accepted, each exactly once unless something published
// an event twice.
func PublishedIn(t testing.TB, log events.Log, tenant string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	prefix := events.EventStream(tenant, "")
	out := map[string]int{}
	from := events.Start
	for {
		recs, err := log.ReadAll(ctx, from, 1000)
		if err != nil {
			t.Fatalf("read the log: %v", err)
		}
		if len(recs) == 0 {
			return out
		}
		for _, r := range recs {
			if r.Type == "EventPublished" && strings.HasPrefix(r.Stream, prefix) {
				out[strings.TrimPrefix(r.Stream, prefix)]++
			}
		}
		from = recs[len(recs)-1].Position
	}
}

// Logger shows warnings on stderr; HOOKLINE_TEST_DEBUG=1 shows everything.
func Logger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("HOOKLINE_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
