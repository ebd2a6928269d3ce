package endpoint_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// pullEndpoint creates a pull endpoint of tenant acme, with edit applied to
// its settings (nil: none).
func (b *bench) pullEndpoint(endpointID string, edit func(*controlv1.EndpointSettings)) *actor.PID {
	b.t.Helper()
	return b.endpoint("acme", endpointID, "", func(s *controlv1.EndpointSettings) {
		s.Delivery = "pull"
		if edit != nil {
			edit(s)
		}
	})
}

// pull leases up to 10 of the endpoint's ready deliveries for lease.
func (b *bench) pull(pid *actor.PID, lease time.Duration) []*controlv1.PulledMessage {
	b.t.Helper()
	return b.pullMax(pid, 10, lease)
}

// pullMax leases up to n of the endpoint's ready deliveries for lease.
func (b *bench) pullMax(pid *actor.PID, n int32, lease time.Duration) []*controlv1.PulledMessage {
	b.t.Helper()
	rep := mustOK(b.t, ask(b.t, b.sys, pid, cmd("acme", &controlv1.PullDeliveriesRequest{Max: n, LeaseSeconds: int32(lease / time.Second)})))
	return rep.GetPulled().GetMessages()
}

// pullUntil pulls until a pull hands out a delivery and returns what it
// handed out.
func (b *bench) pullUntil(pid *actor.PID, lease time.Duration) []*controlv1.PulledMessage {
	b.t.Helper()
	var msgs []*controlv1.PulledMessage
	waitUntil(b.t, "a pull that hands out a delivery", func() bool {
		msgs = b.pull(pid, lease)
		return len(msgs) > 0
	})
	return msgs
}

// ack acknowledges the deliveries ids and returns how many were acked.
func (b *bench) ack(pid *actor.PID, ids ...string) int32 {
	b.t.Helper()
	return mustOK(b.t, ask(b.t, b.sys, pid, cmd("acme", &controlv1.AckDeliveriesRequest{DeliveryIds: ids}))).GetAcked().GetAcked()
}

// emit appends msg to stream as its only writer would, at whatever
// revision it has.
func (b *bench) emit(stream, id string, msg proto.Message) events.AppendResult {
	b.t.Helper()
	e, err := events.Encode(msg, id, stream)
	if err != nil {
		b.t.Fatal(err)
	}
	res, err := b.log.Append(context.Background(), stream, events.Any{}, e)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

// TestPullAfterErasure: a delivery the grain holds ready for its pull
// consumer when its tenant is erased is handed out by no pull: it ends
// failed, erased, its payload unseen. Before, the next pull handed the
// payload out in clear (only a push checked the erasure before sending).
func TestPullAfterErasure(t *testing.T) {
	var fl *faultLog
	var vault events.Vault
	b := newBenchWith(t, func(l events.Log) events.Log {
		vault = l.(events.Vault)
		fl = newFaultLog(l)
		return fl
	})
	payloads := seal.NewPayloads(vault, keyring(t), b.reg.DataKeyErased)
	b.cfg.Payloads = payloads
	b.emit(events.TenantStream("acme"), "tenant/acme", &hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{Weight: 1}})
	pid := b.pullEndpoint("ep_1", nil)
	first := b.publish("acme", "warm_up", "ep_1")[0]
	if msgs := b.pullUntil(pid, 30*time.Second); len(msgs) != 1 || b.ack(pid, first) != 1 {
		t.Fatalf("the first pull handed out %d deliveries, or its ack failed", len(msgs))
	}

	// The publish of a sealed payload, handed to the grain (as the publish
	// path does, in clear, naming its data key) while the projections lag:
	// the grain holds it ready.
	pub, plan := b.event("acme", "evt_1", "ep_1")
	pub.Payload = []byte(`{"email":"erase-me@example.com"}`)
	stored, err := payloads.SealEvent(t.Context(), pub)
	if err != nil {
		t.Fatal(err)
	}
	head, err := b.log.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fl.holdSubscription(&head)
	id := b.append(stored, plan)[0]
	handed := proto.CloneOf(pub)
	handed.PayloadSeal = stored.GetPayloadSeal()
	b.sys.Root.Send(pid, &endpoint.Planned{Event: handed, Items: due.PlannedItems(plan), Position: b.planPosition("evt_1")})
	b.handled(pid)

	// The tenant is erased; every projection applies it.
	b.emit(events.TenantStream("acme"), "erase/acme", &hooklinev1.TenantErased{TenantId: "acme", DataKeyId: stored.GetPayloadSeal().GetDataKeyId(), At: timestamppb.New(b.clk.Now())})
	fl.holdSubscription(nil)
	waitUntil(t, "the erasure applied", func() bool { return b.reg.DataKeyErased("acme", stored.GetPayloadSeal().GetDataKeyId()) })

	for _, m := range b.pull(pid, 30*time.Second) {
		t.Errorf("a pull after the erasure handed out %s with body %q", m.GetDeliveryId(), m.GetBody())
		if bytes.Contains(m.GetBody(), []byte("erase-me")) {
			t.Errorf("the erased payload was handed out in clear")
		}
	}
	b.waitStatus("acme", history.Failed, id)
	evs := b.delivery(id)
	last, ok := evs[len(evs)-1].(*hooklinev1.AttemptFailed)
	if !ok || last.GetAttempt().GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_ERASED {
		t.Errorf("the delivery ended with %v; want a failure of class ERASED", evs[len(evs)-1])
	}
}

// planPosition is the position of an event's plan in the log.
func (b *bench) planPosition(eventID string) events.Position {
	b.t.Helper()
	recs, err := b.log.ReadStream(b.t.Context(), events.EventStream("acme", eventID), events.Forwards, 0, 2)
	if err != nil || len(recs) != 2 {
		b.t.Fatalf("read the plan of %s: %d records, %v", eventID, len(recs), err)
	}
	return recs[1].Position
}

// handled returns once the grain has handled the messages sent to it
// before: its mailbox is in order, and a command's answer comes after.
func (b *bench) handled(pid *actor.PID) {
	b.t.Helper()
	mustOK(b.t, ask(b.t, b.sys, pid, cmd("acme", &controlv1.GetEndpointRequest{})))
}
