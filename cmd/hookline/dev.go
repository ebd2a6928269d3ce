package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
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
	fs := flag.NewFlagSet("hookline dev", flag.ContinueOnError)
	fs.SetOutput(stderr)
	data := fs.String("data", "", "data directory (default: a new temporary directory, removed at exit)")
	verbose := fs.Bool("v", false, "show the node's logs")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir := *data
	if dir == "" {
		tmp, err := os.MkdirTemp("", "hookline-dev-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	}
	level := slog.LevelWarn + 4 // quiet: the playground prints its own story
	if *verbose {
		level = slog.LevelInfo
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	token := randomHex(16)
	say := func(format string, args ...any) { fmt.Fprintf(stdout, format+"\n", args...) }

	srv, err := node.New(ctx, node.Config{
		DataDir: dir, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		Cluster:    cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Logger: logger},
		AdminToken: token, MasterKey: os.Getenv("HOOKLINE_MASTER_KEY"),
		Policy: &attempt.Policy{AllowPrivate: true}, Logger: logger,
	})
	if err != nil {
		return err
	}
	runCtx, stopNode := context.WithCancel(context.WithoutCancel(ctx))
	nodeDone := make(chan error, 1)
	go func() { nodeDone <- srv.Run(runCtx) }()
	defer func() {
		stopNode()
		<-nodeDone
	}()
	say("hookline dev: a single node with private targets allowed (development only)")
	say("  gRPC  %s", srv.GRPCAddr())
	say("  REST  http://%s   (OpenAPI: /openapi.json)", srv.HTTPAddr())
	say("  admin token  %s", token)

	rcv := &devReceiver{out: stdout, failures: map[string]int{}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: rcv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(lis) }()
	defer hs.Close()
	say("  receiver     http://%s/webhooks (verifies every signature)", lis.Addr())

	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer cc.Close()
	call := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	}
	if _, err := controlv1.NewTenantServiceClient(cc).CreateTenant(call(token), &controlv1.CreateTenantRequest{TenantId: "dev", Name: "Development"}); err != nil {
		return fmt.Errorf("create tenant: %w", err)
	}
	key, err := controlv1.NewTenantServiceClient(cc).IssueApiKey(call(token), &controlv1.IssueApiKeyRequest{TenantId: "dev", Name: "playground"})
	if err != nil {
		return fmt.Errorf("issue key: %w", err)
	}
	say("  tenant dev, API key  %s", key.GetApiKey())
	link, err := controlv1.NewPortalServiceClient(cc).IssuePortalToken(call(key.GetApiKey()), &controlv1.IssuePortalTokenRequest{
		Capabilities: []string{"manage_endpoints", "replay"}, TtlSeconds: 24 * 3600, Label: "hookline dev",
	})
	if err != nil {
		return fmt.Errorf("issue portal link: %w", err)
	}
	say("  console      http://%s/console/  (sign in with the admin token or the API key)", srv.HTTPAddr())
	say("  portal link  http://%s%s", srv.HTTPAddr(), link.GetPortalPath())
	ep, err := controlv1.NewEndpointServiceClient(cc).CreateEndpoint(call(key.GetApiKey()), &controlv1.CreateEndpointRequest{
		EndpointId: "ep_dev", Settings: &controlv1.EndpointSettings{
			Url: "http://" + lis.Addr().String() + "/webhooks", EventTypes: []string{"invoice.paid", "order.shipped"},
			Description: "the dev receiver",
		}})
	if err != nil {
		return fmt.Errorf("create endpoint: %w", err)
	}
	v, err := verify.New(ep.GetSecret())
	if err != nil {
		return err
	}
	rcv.setVerifier(v)
	say("  endpoint ep_dev -> %s (secret %s…)", ep.GetEndpoint().GetSettings().GetUrl(), ep.GetSecret()[:12])
	say("")

	samples := []*controlv1.PublishRequest{
		{EventId: "evt_dev_invoice_1", Type: "invoice.paid", Payload: []byte(`{"invoice":"inv_1","amount":4200,"currency":"EUR"}`)},
		{EventId: devFlaky, Type: "order.shipped", Payload: []byte(`{"order":"ord_2","carrier":"DHL"}`)},
		{EventId: "evt_dev_invoice_3", Type: "invoice.paid", Payload: []byte(`{"invoice":"inv_3","amount":990,"currency":"EUR"}`)},
	}
	events := controlv1.NewEventServiceClient(cc)
	for _, p := range samples {
		r, err := events.Publish(call(key.GetApiKey()), p)
		if err != nil {
			return fmt.Errorf("publish %s: %w", p.GetEventId(), err)
		}
		say("published %-20s %-14s -> %d delivery", p.GetEventId(), p.GetType(), len(r.GetDeliveries()))
	}
	say("(the receiver fails %s twice before accepting it; watch the retries)", devFlaky)
	say("")
	watchDeliveries(ctx, controlv1.NewDeliveryServiceClient(cc), call(key.GetApiKey()), stdout)
	say("\nstopping…")
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

// devReceiver verifies and prints every webhook, and fails devFlaky twice.
type devReceiver struct {
	out      io.Writer
	mu       sync.Mutex // guards v and failures
	v        *verify.Verifier
	failures map[string]int
}

func (r *devReceiver) setVerifier(v *verify.Verifier) {
	r.mu.Lock()
	r.v = v
	r.mu.Unlock()
}

func (r *devReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	v := r.v
	r.mu.Unlock()
	eventID := req.Header.Get("webhook-event-id")
	stamp := time.Now().Format("15:04:05")
	if v == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if err := v.Verify(req.Header, body); err != nil {
		fmt.Fprintf(r.out, "receiver %s  REJECTED %s: %v\n", stamp, eventID, err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.mu.Lock()
	fail := eventID == devFlaky && r.failures[eventID] < 2
	if fail {
		r.failures[eventID]++
	}
	r.mu.Unlock()
	sig := strings.Fields(req.Header.Get("webhook-signature"))
	if fail {
		fmt.Fprintf(r.out, "receiver %s  %s %s signature ok (%d sig) -> answering 503 on purpose\n", stamp, req.Header.Get("webhook-id"), eventID, len(sig))
		http.Error(w, "try again", http.StatusServiceUnavailable)
		return
	}
	fmt.Fprintf(r.out, "receiver %s  %s %s %s signature ok -> 200  %s\n", stamp, req.Header.Get("webhook-id"), req.Header.Get("webhook-event-type"), eventID, body)
	w.WriteHeader(http.StatusOK)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
