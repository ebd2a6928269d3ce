package e2e_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/operational"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// opsEvent is an operational event as a receiver gets it.
type opsEvent struct {
	Type      string         `json:"type"`
	Timestamp string         `json:"timestamp"`
	Data      map[string]any `json:"data"`
	Cause     struct {
		Stream string `json:"stream"`
	} `json:"cause"`
}

// opsEvents decodes the operational events that came to path, in order
// of arrival, each once (a retried delivery repeats its webhook-id).
func opsEvents(t *testing.T, rc *hookReceiver, path string) []opsEvent {
	t.Helper()
	var out []opsEvent
	seen := map[string]bool{}
	for _, r := range rc.onPathReceipts(path) {
		if r.status/100 != 2 || seen[r.id] {
			continue
		}
		seen[r.id] = true
		var ev opsEvent
		if err := json.Unmarshal(r.body, &ev); err != nil {
			t.Fatalf("%s %s: %v: %s", path, r.id, err, r.body)
		}
		if ev.Type != r.eventType || !strings.HasPrefix(r.eventID, operational.IDPrefix) {
			t.Fatalf("%s %s: type %q, webhook-event-type %q, webhook-event-id %q", path, r.id, ev.Type, r.eventType, r.eventID)
		}
		out = append(out, ev)
	}
	return out
}

// find returns the first event of type typ about endpoint id.
func find(evs []opsEvent, typ, endpointID string) (opsEvent, bool) {
	for _, ev := range evs {
		if ev.Type == typ && ev.Data["endpoint_id"] == endpointID {
			return ev, true
		}
	}
	return opsEvent{}, false
}

// runE2E is startE2E on cfg.DataDir as given, with a stop function, so
// that a test can stop a node and start another on its data.
func runE2E(t *testing.T, cfg node.Config) (*e2eNode, func()) {
	t.Helper()
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cluster = cluster.Config{Port: cluster.AnyPort, GossipPort: cluster.AnyPort, Logger: testLogger()}
	cfg.AdminToken, cfg.MasterKey = e2eAdmin, e2eMasterKey
	if cfg.Policy == nil {
		cfg.Policy = &attempt.Policy{AllowPrivate: true}
	}
	cfg.Logger = testLogger()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := node.New(ctx, cfg)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	cc, err := grpc.NewClient(srv.GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(callTimeout(20*time.Second)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cc.Close()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("server stopped with %v", err)
			}
		case <-time.After(45 * time.Second):
			t.Errorf("server did not stop within 45 s")
		}
	}
	t.Cleanup(stop)
	return &e2eNode{srv: srv, cc: cc}, stop
}

// TestOperationalWebhooks: a tenant's operational endpoint receives
// Hookline's own events about its account (a circuit opened, an endpoint
// paused by a 410 and by a person), signed (the receiver verifies every
// request with the Standard Webhooks library) and searchable like any
// delivery; an endpoint subscribed to every type does not get them; the
// operational endpoint's own failures (its circuit opened) cause none; a
// node that rebuilds its projections emits them again, and the publish
// path answers the repeats as duplicates: no delivery twice.
func TestOperationalWebhooks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	cfg := node.Config{
		DataDir: dir,
		Breaker: endpoint.BreakerConfig{Threshold: 3, CoolDown: 300 * time.Millisecond, MaxCoolDown: time.Second},
		// Quick retries: the operational endpoint's failures are retried
		// within a second.
		Schedule: attempt.Schedule{Base: 20 * time.Millisecond, Cap: 200 * time.Millisecond, MaxAttempts: 20},
	}
	node, stop := runE2E(t, cfg)
	rc := newHookReceiver(t, nil)
	acme := node.tenant(t, "acme", nil)

	// ops gets every operational event; its first three requests fail,
	// which opens its own circuit. ops2 gets circuit openings only; all
	// subscribes to every type.
	var opsRequests atomic.Int32
	acme.endpoint(t, rc, "ops", []string{operational.All}, nil, func(w http.ResponseWriter, _ *http.Request, _ int) {
		if opsRequests.Add(1) <= 3 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	acme.endpoint(t, rc, "ops2", []string{operational.CircuitOpened}, nil, answer(http.StatusOK))
	acme.endpoint(t, rc, "all", []string{"*"}, nil, answer(http.StatusOK))
	opsID, ops2ID := acme.ids["ops"], acme.ids["ops2"]

	t.Run("only operational types, and producers cannot publish them", func(t *testing.T) {
		_, err := acme.endpoints.CreateEndpoint(acme.ctx(), &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
			Url: rc.url("/mixed"), EventTypes: []string{operational.EndpointPaused, "order.paid"},
		}})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "settings.event_types") {
			t.Fatalf("an endpoint mixing operational and business types: %v", err)
		}
		_, err = acme.events.Publish(acme.ctx(), &controlv1.PublishRequest{EventId: "fake_1", Type: operational.EndpointPaused, Payload: []byte(`{}`)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "type") {
			t.Fatalf("a producer publishing an operational type: %v", err)
		}
		list, err := acme.events.ListOperationalEventTypes(acme.ctx(), &controlv1.ListOperationalEventTypesRequest{})
		if err != nil || len(list.GetTypes()) != 8 || !json.Valid([]byte(list.GetTypes()[0].GetExample())) {
			t.Fatalf("operational event types: %v, %v", list, err)
		}
	})

	t.Run("circuit opened and endpoint paused by a 410, signed", func(t *testing.T) {
		// orders fails until its circuit opens, then answers 410 to the
		// probe (the endpoint pauses). Switched only once the opening is
		// recorded: a 410 answered to an attempt still out would reset the
		// count of failures (a permanent answer) before it reached three.
		var gone atomic.Bool
		acme.endpoint(t, rc, "orders", []string{"order.paid"}, nil, func(w http.ResponseWriter, _ *http.Request, _ int) {
			if !gone.Load() {
				w.WriteHeader(http.StatusBadGateway)
				return
			}
			w.WriteHeader(http.StatusGone)
		})
		ordersID := acme.ids["orders"]
		for _, id := range []string{"ord_1", "ord_2", "ord_3"} {
			acme.publish(t, id, "order.paid")
		}
		var opened, paused opsEvent
		t.Cleanup(func() {
			if t.Failed() {
				for _, r := range rc.onPathReceipts("/ops") {
					t.Logf("ops: %s %d %s", r.eventType, r.status, r.body)
				}
				recs, _ := node.srv.Log().ReadStream(context.Background(), events.EndpointStream(ordersID), events.Forwards, 0, 100)
				for _, r := range recs {
					t.Logf("orders stream: %s", r.Type)
				}
			}
		})
		eventually(t, 30*time.Second, "the circuit of orders open", func() bool {
			return acme.getEndpoint(t, "orders").GetCircuit() == controlv1.Endpoint_CIRCUIT_OPEN
		})
		gone.Store(true)
		eventually(t, 30*time.Second, "ops got circuit_opened and paused about orders", func() bool {
			evs := opsEvents(t, rc, "/ops")
			var ok1, ok2 bool
			opened, ok1 = find(evs, operational.CircuitOpened, ordersID)
			paused, ok2 = find(evs, operational.EndpointPaused, ordersID)
			return ok1 && ok2
		})
		if opened.Data["consecutive_failures"] != 3.0 || opened.Data["last_error_class"] != "http_status" || opened.Cause.Stream != events.EndpointStream(ordersID) {
			t.Errorf("circuit_opened: %+v", opened)
		}
		if paused.Data["reason"] != "gone" || !strings.HasPrefix(paused.Data["delivery_id"].(string), "dlv_") {
			t.Errorf("paused: %+v", paused)
		}
		eventually(t, 10*time.Second, "ops2 got circuit_opened about orders", func() bool {
			_, ok := find(opsEvents(t, rc, "/ops2"), operational.CircuitOpened, ordersID)
			return ok
		})
		if bad := rc.rejected(); len(bad) > 0 {
			t.Fatalf("requests that failed verification: %v", bad)
		}
	})

	t.Run("endpoint paused by a person", func(t *testing.T) {
		acme.endpoint(t, rc, "manual", []string{"order.paid"}, nil, answer(http.StatusOK))
		if _, err := acme.endpoints.PauseEndpoint(acme.ctx(), &controlv1.PauseEndpointRequest{EndpointId: acme.ids["manual"]}); err != nil {
			t.Fatal(err)
		}
		var paused opsEvent
		eventually(t, 10*time.Second, "ops got paused about manual", func() bool {
			var ok bool
			paused, ok = find(opsEvents(t, rc, "/ops"), operational.EndpointPaused, acme.ids["manual"])
			return ok
		})
		by, _ := paused.Data["paused_by"].(map[string]any)
		if paused.Data["reason"] != "requested" || by["kind"] != "api_key" {
			t.Errorf("paused: %+v", paused)
		}
	})

	t.Run("nothing about the operational endpoints themselves", func(t *testing.T) {
		eventually(t, 10*time.Second, "the outbox empty", func() bool { return node.metric(t, "hookline_operational_outbox") == 0 })
		recs, err := node.srv.Log().ReadStream(t.Context(), events.EndpointStream(opsID), events.Forwards, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range recs {
			if r.Type == "CircuitOpened" || r.Type == "CircuitClosed" {
				ids = append(ids, operational.EventID(r.ID))
			}
		}
		if len(ids) < 2 {
			t.Fatalf("ops's own circuit did not open and close: %d events", len(recs))
		}
		got, err := acme.events.LookupEvents(acme.ctx(), &controlv1.LookupEventsRequest{EventIds: ids})
		if err != nil || len(got.GetFound()) != 0 {
			t.Fatalf("operational events about ops's own circuit: %v, %v", got.GetFound(), err)
		}
		for _, path := range []string{"/ops", "/ops2"} {
			for _, ev := range opsEvents(t, rc, path) {
				if ev.Data["endpoint_id"] == opsID || ev.Data["endpoint_id"] == ops2ID {
					t.Errorf("%s got %s about an operational endpoint", path, ev.Type)
				}
			}
		}
		for _, r := range rc.onPathReceipts("/all") {
			if operational.Reserved(r.eventType) {
				t.Errorf("the endpoint subscribed to every type got %s", r.eventType)
			}
		}
	})

	t.Run("searchable like any delivery", func(t *testing.T) {
		page, err := acme.deliveries.ListDeliveries(acme.ctx(), &controlv1.ListDeliveriesRequest{EventType: operational.CircuitOpened, PageSize: 100})
		if err != nil {
			t.Fatal(err)
		}
		to := map[string]bool{}
		for _, d := range page.GetDeliveries() {
			to[d.GetEndpointId()] = true
			if !strings.HasPrefix(d.GetEventId(), operational.IDPrefix) {
				t.Errorf("delivery %v", d)
			}
		}
		if !to[opsID] || !to[ops2ID] || len(to) != 2 {
			t.Fatalf("deliveries of %s went to %v", operational.CircuitOpened, to)
		}
	})

	t.Run("a rebuilt feed sends nothing twice", func(t *testing.T) {
		before, ids := rc.total()
		emitted := node.metric(t, "hookline_operational_events_total")
		stop()
		// The projections start empty: every cause of the last day is
		// applied, and emitted, again.
		cfg.ProjectionsFS = vfs.NewMem()
		node2, _ := runE2E(t, cfg)
		eventually(t, 30*time.Second, "the causes emitted again", func() bool {
			return node2.metric(t, "hookline_operational_events_total") >= emitted &&
				node2.metric(t, "hookline_operational_outbox") == 0
		})
		// A marker after the repeats: one more operational event.
		acme2 := &tenantClient{t: t, id: acme.id, key: acme.key, endpoints: controlv1.NewEndpointServiceClient(node2.cc)}
		if _, err := acme2.endpoints.ResumeEndpoint(acme2.ctx(), &controlv1.ResumeEndpointRequest{EndpointId: acme.ids["manual"]}); err != nil {
			t.Fatal(err)
		}
		if _, err := acme2.endpoints.PauseEndpoint(acme2.ctx(), &controlv1.PauseEndpointRequest{EndpointId: acme.ids["manual"]}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 20*time.Second, "the marker delivered", func() bool {
			n := 0
			for _, ev := range opsEvents(t, rc, "/ops") {
				if ev.Type == operational.EndpointPaused && ev.Data["endpoint_id"] == acme.ids["manual"] {
					n++
				}
			}
			return n == 2 && node2.metric(t, "hookline_operational_outbox") == 0
		})
		after, idsAfter := rc.total()
		if idsAfter != ids+1 {
			t.Fatalf("webhook-ids: %d before the restart, %d after (want one more: the marker)", ids, idsAfter)
		}
		t.Logf("%d requests, %d webhook-ids before the rebuild; %d, %d after", before, ids, after, idsAfter)
		if bad := rc.rejected(); len(bad) > 0 || slices.ContainsFunc(rc.onPathReceipts("/ops"), func(r receipt) bool { return r.eventType == "" }) {
			t.Fatalf("verification: %v", bad)
		}
	})
}
