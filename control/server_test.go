package control_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/portal"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// These tests serve the control API over loopback on an embedded log and
// the node's projections, both in memory. No grain runs: calls that need
// one are not made here (node/e2e makes them).

const adminToken = "control-test-admin"

// node is a control API on loopback and what it is built on.
type node struct {
	srv  *control.Server
	log  *countingLog
	cc   *grpc.ClientConn
	runs *projections.Runner
	// payloads seals the payloads (startSealed), nil otherwise.
	payloads *seal.Payloads
}

// countingLog counts the reads of the log's head: each is a round trip to
// the database on a shared log. A test may hold appends in beforeAppend.
type countingLog struct {
	events.Log
	heads        atomic.Int64
	beforeAppend atomic.Pointer[func(stream string)]
}

func (l *countingLog) Head(ctx context.Context) (events.Position, error) {
	l.heads.Add(1)
	return l.Log.Head(ctx)
}

func (l *countingLog) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if f := l.beforeAppend.Load(); f != nil {
		(*f)(stream)
	}
	return l.Log.Append(ctx, stream, expected, evs...)
}

// noGrains stands for the cluster: no grain answers in these tests.
type noGrains struct{}

func (noGrains) Request(context.Context, string, string, proto.Message) (proto.Message, error) {
	return nil, errors.New("no grain runs in this test")
}

// start serves a control API configured by cfg (its stores filled in)
// until the test ends.
func start(t *testing.T, cfg control.Config) *node {
	t.Helper()
	return startOn(t, cfg, false)
}

// startSealed is start with payloads sealed under data keys in the log's
// vault (n.payloads), erased as the registry says.
func startSealed(t *testing.T, cfg control.Config) *node {
	t.Helper()
	return startOn(t, cfg, true)
}

func startOn(t *testing.T, cfg control.Config, sealed bool) *node {
	t.Helper()
	fs := vfs.NewMem()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	cl := &countingLog{Log: l}
	runs, err := projections.Open(cl, projections.Config{Dir: "projections", FS: fs, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := registry.New(runs)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := portal.New(runs)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runs.Run(ctx) }()
	cfg.Log, cfg.Grains, cfg.Registry, cfg.Projections, cfg.Portal = cl, noGrains{}, reg, runs, toks
	if sealed {
		kr, err := seal.NewKeyring(seal.Key{Secret: make([]byte, seal.KeySize)})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Payloads = seal.NewPayloads(l, kr, reg.DataKeyErased)
	}
	cfg.AdminToken = adminToken
	srv, err := control.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Ready() // the test's projections are current
	g := srv.NewGRPCServer()
	go func() { _ = g.Serve(lis) }()
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cc.Close()
		g.Stop()
		cancel()
		<-done
		_ = runs.Close()
		_ = l.Close()
	})
	return &node{srv: srv, log: cl, cc: cc, runs: runs, payloads: cfg.Payloads}
}

// tenant records a tenant in the log, as its grain would, and waits until
// the projections have it.
func (n *node) tenant(t *testing.T, id string) {
	t.Helper()
	ev, err := events.Encode(&hooklinev1.TenantCreated{TenantId: id, Name: id, Quota: &hooklinev1.Quota{}, At: timestamppb.Now()}, "create/"+id, events.TenantStream(id))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.log.Append(ctx, events.TenantStream(id), events.NoStream{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.runs.WaitFor(ctx, res.Position); err != nil {
		t.Fatal(err)
	}
}

// as returns a context that carries token as its bearer.
func as(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// endpoint records an endpoint of tenant subscribed to every type, as its
// grain would, and waits until the projections have it.
func (n *node) endpoint(t *testing.T, tenant, id string) {
	t.Helper()
	ev, err := events.Encode(&hooklinev1.EndpointCreated{
		TenantId: tenant, EndpointId: id, ConfigVersion: 1, At: timestamppb.Now(),
		Config: &hooklinev1.EndpointConfig{Url: "https://example.com/" + id, EventTypes: []string{"*"}},
		Secret: &hooklinev1.SealedSecret{Version: 1},
	}, "create/"+id, events.EndpointStream(id))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := n.log.Append(ctx, events.EndpointStream(id), events.NoStream{}, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.runs.WaitFor(ctx, res.Position); err != nil {
		t.Fatal(err)
	}
}
