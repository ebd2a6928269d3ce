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
// event and its own delivery's stream. Once b's delivery ends (it
// expires when its endpoint is resumed, past its deadline), the event
// leaves the log with both deliveries' streams. Before, a's pass dropped
// the event under b's pending delivery.
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

	// An endpoint served by a, which answers, and one served by b, paused.
	api := controlv1.NewEndpointServiceClient(a.cc)
	var onA, onB string
	for i := 0; onA == "" || onB == ""; i++ {
		r, err := api.CreateEndpoint(kctx, &controlv1.CreateEndpointRequest{
			EndpointId: fmt.Sprintf("ep_%02d", i), Settings: &controlv1.EndpointSettings{Url: recv.URL + "/in", EventTypes: []string{"order.paid", "order.created"}},
		})
		if err != nil {
			t.Fatal(err)
		}
		id := r.GetEndpoint().GetEndpointId()
		switch p := events.PartitionOf(id); {
		case onA == "" && a.srv.Serving().Has(p):
			onA = id
		case onB == "" && b.srv.Serving().Has(p):
			onB = id
			if _, err := api.PauseEndpoint(kctx, &controlv1.PauseEndpointRequest{EndpointId: id}); err != nil {
				t.Fatal(err)
			}
		default:
			if _, err := api.DeleteEndpoint(kctx, &controlv1.DeleteEndpointRequest{EndpointId: id}); err != nil {
				t.Fatal(err)
			}
		}
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
	// The event, to both; the probe, which b's endpoint (paused) does not
	// take: once it leaves the log, a's pass has judged the event too.
	if _, err := api.UpdateEndpoint(kctx, &controlv1.UpdateEndpointRequest{
		EndpointId: onB, Settings: &controlv1.EndpointSettings{EventTypes: []string{"order.paid"}}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"event_types"}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range []struct{ id, typ string }{{"ev_1", "order.paid"}, {"ev_probe", "order.created"}} {
		if _, err := publish.Publish(kctx, &controlv1.PublishRequest{EventId: ev.id, Type: ev.typ, Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	onAID, onBID := events.DeliveryID("acme", "ev_1", onA), events.DeliveryID("acme", "ev_1", onB)
	poll(t, 20*time.Second, "a's deliveries succeed, b's waits", func() bool {
		return statusOf(onAID) == "succeeded" && statusOf(events.DeliveryID("acme", "ev_probe", onA)) == "succeeded" && statusOf(onBID) == "pending"
	})

	clk.Add(3 * time.Minute)
	poll(t, 20*time.Second, "a's pass drops the probe", func() bool { return !inLog(events.EventStream("acme", "ev_probe")) })
	if !inLog(events.EventStream("acme", "ev_1")) {
		t.Fatalf("a's pass dropped the event while b's delivery of it is pending")
	}
	if !inLog(events.DeliveryStream(onAID)) || statusOf(onAID) != "succeeded" {
		t.Errorf("a's pass dropped its delivery of an event it keeps: in the log %v, status %s", inLog(events.DeliveryStream(onAID)), statusOf(onAID))
	}

	if _, err := api.ResumeEndpoint(kctx, &controlv1.ResumeEndpointRequest{EndpointId: onB}); err != nil {
		t.Fatal(err)
	}
	poll(t, 30*time.Second, "the event leaves the log with both deliveries, once b's has ended", func() bool {
		return !inLog(events.EventStream("acme", "ev_1")) && !inLog(events.DeliveryStream(onAID)) && !inLog(events.DeliveryStream(onBID))
	})
	if got := recv.distinct("/in"); got != 2 {
		t.Errorf("the receiver got %d deliveries, want 2 (a's endpoint's: the event and the probe)", got)
	}
}
