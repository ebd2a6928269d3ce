//go:build !race

// Two nodes in one process race inside protoactor-go; .ci/run runs this
// file without -race (see server_test.go).

package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// offsetClock is the real clock moved forward by hand.
type offsetClock struct {
	mu  sync.Mutex // guards off
	off time.Duration
}

func (c *offsetClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *offsetClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// TestTenantRetentionAcrossMembers: a tenant's own retention keeps an
// event while a delivery of it is pending on another member: member a,
// whose pass finds its own delivery of the event ended past the cutoff,
// asks member b, whose delivery waits on a paused endpoint, and keeps the
// event and its own delivery's stream. Once b's delivery has ended (it
// expires when its endpoint is resumed, past its deadline), members that
// cannot ask each other (their retention services silenced, as an older
// build's) still keep the event: never dropped on doubt. Once they answer
// again, the event leaves the log with both deliveries' streams. Before,
// a's pass dropped the event under b's pending delivery.
func TestTenantRetentionAcrossMembers(t *testing.T) {
	clk := &offsetClock{}
	l, a, b := startPair(t, func(c *node.Config) {
		c.Now, c.Retention, c.RetainEvery = clk.Now, 30*time.Minute, 50*time.Millisecond
		c.Schedule = attempt.Schedule{Deadline: 90 * time.Second}
	})
	recv := newCountingReceiver(t)
	key := tenantWithKey(t, a)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+admin)
	kctx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+key)
	if _, err := controlv1.NewTenantServiceClient(a.cc).UpdateTenant(actx, &controlv1.UpdateTenantRequest{
		TenantId: "acme", Settings: &controlv1.TenantSettings{Retention: "2m"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"retention"}},
	}); err != nil {
		t.Fatal(err)
	}

	// On a, an endpoint that answers (onA); on b, a paused one (onB) and
	// one that answers (onB2). The probes (ping.a, ping.b) each go to one
	// member's endpoint only: once a probe leaves the log, that member's
	// pass has also judged the event.
	api := controlv1.NewEndpointServiceClient(a.cc)
	roles := []struct {
		on    *testServer
		types []string
		id    string
	}{{a, []string{"order.paid", "ping.a"}, ""}, {b, []string{"order.paid"}, ""}, {b, []string{"ping.b"}, ""}}
	for i, r := range roles {
		for j := 0; roles[i].id == ""; j++ {
			res, err := api.CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{
				EndpointId: fmt.Sprintf("ep_%d_%02d", i, j), Settings: &controlv1.EndpointSettings{Url: recv.URL + "/in", EventTypes: r.types},
			})
			if err != nil {
				t.Fatal(err)
			}
			id := res.GetEndpoint().GetEndpointId()
			if r.on.srv.Serving().Has(events.PartitionOf(id)) {
				roles[i].id = id
			} else if _, err := api.DeleteEndpoint(kctx, &controlv1.DeleteEndpointRequest{EndpointId: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	onA, onB, onB2 := roles[0].id, roles[1].id, roles[2].id
	if _, err := api.PauseEndpoint(kctx, &controlv1.PauseEndpointRequest{EndpointId: onB}); err != nil {
		t.Fatal(err)
	}
	publish := controlv1.NewEventServiceClient(a.cc)
	deliveries := controlv1.NewDeliveryServiceClient(b.cc)
	statusOf := func(id string) string {
		d, err := deliveries.GetDelivery(kctx, &controlv1.GetDeliveryRequest{DeliveryId: id})
		if err != nil {
			return err.Error()
		}
		return d.GetStatus()
	}
	inLog := func(stream string) bool {
		_, err := l.ReadStream(ctx, stream, events.Forwards, 0, 1)
		return !errors.Is(err, events.ErrStreamNotFound)
	}
	probe := func(round int) {
		t.Helper()
		for _, typ := range []string{"ping.a", "ping.b"} {
			if _, err := publish.Publish(kctx, &controlv1.PublishRequest{EventId: fmt.Sprintf("%s.%d", typ, round), Type: typ, Payload: []byte(`{}`)}); err != nil {
				t.Fatal(err)
			}
		}
		poll(t, 20*time.Second, "the probes delivered", func() bool {
			return statusOf(events.DeliveryID("acme", fmt.Sprintf("ping.a.%d", round), onA)) == "succeeded" &&
				statusOf(events.DeliveryID("acme", fmt.Sprintf("ping.b.%d", round), onB2)) == "succeeded"
		})
	}
	probed := func(round int) {
		t.Helper()
		poll(t, 20*time.Second, "both members' passes drop their probe", func() bool {
			return !inLog(events.EventStream("acme", fmt.Sprintf("ping.a.%d", round))) && !inLog(events.EventStream("acme", fmt.Sprintf("ping.b.%d", round)))
		})
	}

	if _, err := publish.Publish(kctx, &controlv1.PublishRequest{EventId: "ev_1", Type: "order.paid", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	onAID, onBID := events.DeliveryID("acme", "ev_1", onA), events.DeliveryID("acme", "ev_1", onB)
	probe(1)
	poll(t, 20*time.Second, "a's delivery succeeds, b's waits", func() bool {
		return statusOf(onAID) == "succeeded" && statusOf(onBID) == "pending"
	})
	clk.Add(3 * time.Minute)
	probed(1)
	if !inLog(events.EventStream("acme", "ev_1")) {
		t.Fatalf("a's pass dropped the event while b's delivery of it is pending")
	}
	if !inLog(events.DeliveryStream(onAID)) || statusOf(onAID) != "succeeded" {
		t.Errorf("a's pass dropped its delivery of an event it keeps: in the log %v, status %s", inLog(events.DeliveryStream(onAID)), statusOf(onAID))
	}

	// b's delivery ends while neither member can ask the other.
	var restore []func() error
	for _, ts := range []*testServer{a, b} {
		r, err := ts.srv.SilenceRetention()
		if err != nil {
			t.Fatal(err)
		}
		restore = append(restore, r)
	}
	if _, err := api.ResumeEndpoint(kctx, &controlv1.ResumeEndpointRequest{EndpointId: onB}); err != nil {
		t.Fatal(err)
	}
	poll(t, 20*time.Second, "b's delivery expires once resumed, past its deadline", func() bool { return statusOf(onBID) == "failed" })
	probe(2)
	clk.Add(3 * time.Minute)
	probed(2)
	if !inLog(events.EventStream("acme", "ev_1")) {
		t.Fatalf("a pass dropped the event though it could not learn whether the other member's delivery ended")
	}

	for _, r := range restore {
		if err := r(); err != nil {
			t.Fatal(err)
		}
	}
	poll(t, 30*time.Second, "the event leaves the log with both deliveries", func() bool {
		return !inLog(events.EventStream("acme", "ev_1")) && !inLog(events.DeliveryStream(onAID)) && !inLog(events.DeliveryStream(onBID))
	})
	if got := recv.distinct("/in"); got != 5 {
		t.Errorf("the receiver got %d deliveries, want 5 (a's of the event, and the probes)", got)
	}
}
