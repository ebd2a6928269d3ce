package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/verify"
)

// devFlaky is the sample event that the dev receiver fails twice before
// accepting it, to show retries.
const devFlaky = "evt_dev_order_2"

// dev starts a single embedded node with private targets allowed, a local
// receiver that verifies signatures, a tenant and an endpoint, publishes a
// few sample events and shows their deliveries as they unfold, until ctx
// ends (Ctrl-C).
func dev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("dev")
	data := fs.String("data", "", "data directory (default: a new temporary directory, removed at exit)")
	verbose := fs.Bool("v", false, "show the node's logs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }
	dir, removeDir, err := devDataDir(*data)
	if err != nil {
		return err
	}
	defer removeDir()
	level := slog.LevelWarn + 4 // quiet: the playground prints its own story
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	token := randomHex(16)
	srv, stopNode, err := startDevNode(ctx, dir, token, logger)
	if err != nil {
		return err
	}
	defer stopNode()
	say("hookline dev: a single node with private targets allowed (development only)")
	say("  gRPC  %s", srv.GRPCAddr())
	say("  REST  http://%s   (OpenAPI: /openapi.json)", srv.HTTPAddr())
	say("  admin token  %s", token)

	// The receiver listens now, for the endpoint's URL, and serves once
	// the endpoint's secret is known.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("receiver: %w", err)
	}
	defer lis.Close()
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	pg := playground{cc: cc, admin: token, say: say}
	if err := pg.setUp(ctx, srv.HTTPAddr(), "http://"+lis.Addr().String()+"/webhooks"); err != nil {
		return unlessStopped(ctx, err)
	}
	v, err := verify.New(pg.secret)
	if err != nil {
		return err
	}
	rcv := &receiver{out: stdout, label: "receiver ", verifier: v, flakyEvent: devFlaky, flakyTimes: 2}
	rcvCtx, stopReceiver := context.WithCancel(ctx)
	received := make(chan error, 1)
	go func() { received <- serveHTTP(rcvCtx, lis, rcv) }()
	defer func() {
		stopReceiver()
		<-received
	}()
	say("  receiver     http://%s/webhooks (verifies every signature)", lis.Addr())
	say("")

	if err := pg.publishSamples(ctx); err != nil {
		return unlessStopped(ctx, err)
	}
	watchDeliveries(ctx, controlv1.NewDeliveryServiceClient(cc), bearer(ctx, pg.key), stdout)
	say("\nstopping…")
	return nil
}

// unlessStopped is err, or nil when ctx ended (Ctrl-C while dev was
// setting up is a stop, not a failure).
func unlessStopped(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// devDataDir is dir, or a new temporary directory that remove removes.
func devDataDir(dir string) (_ string, remove func(), err error) {
	if dir != "" {
		return dir, func() {}, nil
	}
	tmp, err := os.MkdirTemp("", "hookline-dev-")
	if err != nil {
		return "", nil, err
	}
	return tmp, func() { os.RemoveAll(tmp) }, nil
}

// startDevNode starts a node on loopback with private targets allowed;
// stop stops it and waits until it has.
func startDevNode(ctx context.Context, dir, token string, logger *slog.Logger) (_ *node.Server, stop func(), err error) {
	srv, err := node.New(ctx, node.Config{
		DataDir: dir, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Cluster:    cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Logger: logger},
		AdminToken: token, MasterKey: os.Getenv("HOOKLINE_MASTER_KEY"),
		Policy: &attempt.Policy{AllowPrivate: true}, Logger: logger,
	})
	if err != nil {
		return nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- srv.Run(runCtx) }()
	return srv, func() {
		cancel()
		<-done
	}, nil
}

// playground is the dev tenant as it is set up: its API key and its
// endpoint's secret.
type playground struct {
	cc     *grpc.ClientConn
	admin  string
	say    func(format string, args ...any)
	key    string
	secret string
}

// bearer is ctx with token as the caller's bearer token.
func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// setUp creates the tenant dev, its API key, a portal link and an endpoint
// that delivers to url (asked for as ep_dev; the node adds a suffix of
// its own, and the id printed is the one it answered).
func (pg *playground) setUp(ctx context.Context, httpAddr, url string) error {
	tenants := controlv1.NewTenantServiceClient(pg.cc)
	if _, err := tenants.CreateTenant(bearer(ctx, pg.admin), &controlv1.CreateTenantRequest{TenantId: "dev", Name: "Development"}); err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	key, err := tenants.IssueApiKey(bearer(ctx, pg.admin), &controlv1.IssueApiKeyRequest{TenantId: "dev", Name: "playground"})
	if err != nil {
		return fmt.Errorf("issue key: %w", err)
	}
	pg.key = key.GetApiKey()
	pg.say("  tenant dev, API key  %s", pg.key)
	link, err := controlv1.NewPortalServiceClient(pg.cc).IssuePortalToken(bearer(ctx, pg.key), &controlv1.IssuePortalTokenRequest{
		Capabilities: []string{"manage_endpoints", "replay"}, TtlSeconds: 24 * 3600, Label: "hookline dev",
	})
	if err != nil {
		return fmt.Errorf("issue portal link: %w", err)
	}
	pg.say("  console      http://%s/console/  (sign in with the admin token or the API key)", httpAddr)
	pg.say("  portal link  http://%s%s", httpAddr, link.GetPortalPath())
	ep, err := controlv1.NewEndpointServiceClient(pg.cc).CreateEndpoint(bearer(ctx, pg.key), &controlv1.CreateEndpointRequest{
		EndpointId: "ep_dev", Settings: &controlv1.EndpointSettings{
			Url: url, EventTypes: []string{"invoice.paid", "order.shipped"}, Description: "the dev receiver",
		}})
	if err != nil {
		return fmt.Errorf("create endpoint: %w", err)
	}
	pg.secret = ep.GetSecret()
	pg.say("  endpoint %s -> %s (secret %s…)", ep.GetEndpoint().GetEndpointId(), ep.GetEndpoint().GetSettings().GetUrl(), pg.secret[:12])
	return nil
}

// publishSamples publishes three sample events as the dev tenant.
func (pg *playground) publishSamples(ctx context.Context) error {
	samples := []*controlv1.PublishRequest{
		{EventId: "evt_dev_invoice_1", Type: "invoice.paid", Payload: []byte(`{"invoice":"inv_1","amount":4200,"currency":"EUR"}`)},
		{EventId: devFlaky, Type: "order.shipped", Payload: []byte(`{"order":"ord_2","carrier":"DHL"}`)},
		{EventId: "evt_dev_invoice_3", Type: "invoice.paid", Payload: []byte(`{"invoice":"inv_3","amount":990,"currency":"EUR"}`)},
	}
	events := controlv1.NewEventServiceClient(pg.cc)
	for _, p := range samples {
		r, err := events.Publish(bearer(ctx, pg.key), p)
		if err != nil {
			return fmt.Errorf("publish %s: %w", p.GetEventId(), err)
		}
		pg.say("published %-20s %-14s -> %d delivery", p.GetEventId(), p.GetType(), len(r.GetDeliveries()))
	}
	pg.say("(the receiver fails %s twice before accepting it; watch the retries)", devFlaky)
	pg.say("")
	return nil
}

// watchDeliveries prints each change of the tenant's deliveries until ctx
// ends.
func watchDeliveries(ctx context.Context, c controlv1.DeliveryServiceClient, call context.Context, out io.Writer) {
	seen := map[string]string{}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		r, err := c.ListDeliveries(call, &controlv1.ListDeliveriesRequest{PageSize: 100})
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintf(out, "history: %v\n", err)
			}
			continue
		}
		ds := r.GetDeliveries()
		sort.Slice(ds, func(i, j int) bool { return ds[i].GetEventId() < ds[j].GetEventId() })
		for _, d := range ds {
			line := fmt.Sprintf("%s attempts=%d last_status=%d", d.GetStatus(), d.GetAttemptCount(), d.GetLastHttpStatus())
			if seen[d.GetDeliveryId()] == line {
				continue
			}
			seen[d.GetDeliveryId()] = line
			next := ""
			if t := d.GetNextAttemptAt(); t != nil && d.GetStatus() == "pending" {
				next = fmt.Sprintf(" next attempt in %s", time.Until(t.AsTime()).Round(100*time.Millisecond))
			}
			fmt.Fprintf(out, "history  %s  %-20s %-9s attempts=%d last_status=%d%s\n",
				time.Now().Format("15:04:05"), d.GetEventId(), d.GetStatus(), d.GetAttemptCount(), d.GetLastHttpStatus(), next)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
