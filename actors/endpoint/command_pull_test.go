package endpoint_test

import (
	"bytes"
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/dispatch"
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

// TestPullLeaseEndsAfterASwitchToPush: a delivery leased to a pull
// consumer when its endpoint switches to push is not left pending: its
// lease ends as any other (a failed attempt), and push delivers it after
// the backoff. Before, the lease was never looked at again once the
// endpoint pushed, and the delivery stayed held, pending, for good.
func TestPullLeaseEndsAfterASwitchToPush(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusOK))
	pid := b.pullEndpoint("ep_1", nil)
	id := b.publish("acme", "evt_1", "ep_1")[0]
	if msgs := b.pullUntil(pid, 10*time.Second); len(msgs) != 1 || msgs[0].GetDeliveryId() != id {
		t.Fatalf("the pull handed out %v; want %s", msgs, id)
	}

	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.UpdateEndpointRequest{
		Settings: &controlv1.EndpointSettings{Url: rc.URL + "/in", EventTypes: []string{"*"}, Delivery: "push"},
	})))
	b.advance(11 * time.Second) // past the lease
	evs := b.waitEvents(id, 1)
	if f, ok := evs[0].(*hooklinev1.AttemptFailed); !ok || !f.GetAttempt().GetPulled() || f.GetNextAttemptAt() == nil {
		t.Fatalf("after its lease the delivery recorded %v; want a failed, pulled attempt with a retry", evs[0])
	}
	if n := rc.count(id); n != 0 {
		t.Fatalf("pushed %d times before the lease's retry was due", n)
	}
	b.advance(time.Hour) // past any backoff
	b.waitStatus("acme", history.Succeeded, id)
	if n := rc.count(id); n != 1 {
		t.Errorf("the receiver got the delivery %d times; want once", n)
	}
}

// TestPullLeasesNoneWhileDraining: while the endpoint's partition drains
// for a hand-over, a pull hands out nothing, for the next owner would hand
// the same deliveries out too; the leases already out are listed with the
// running attempts, which the hand-over passes on, so that the next owner
// offers none of them before its lease has run out. Before, a draining
// partition went on leasing, and its leases were listed nowhere.
func TestPullLeasesNoneWhileDraining(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	drain := &endpoint.Drain{}
	b.cfg.Drain = drain
	pid := b.pullEndpoint("ep_1", nil)
	ids := b.readyForPull(fl, pid, "evt_1", "evt_2")
	leased, waiting := ids[0], ids[1]
	p := events.PartitionOf("ep_1")
	waitUntil(t, "the first lease's outcome recorded", func() bool { return len(drain.Running(p)) == 0 })

	msgs := b.pullMax(pid, 1, 30*time.Second)
	if len(msgs) != 1 || msgs[0].GetDeliveryId() != leased {
		t.Fatalf("the pull handed out %v; want %s", msgs, leased)
	}
	running := drain.Running(p)
	if len(running) != 1 || running[0].DeliveryID != leased || running[0].Attempt != 1 || !running[0].Until.After(msgs[0].GetLeaseExpiresAt().AsTime()) {
		t.Errorf("the drain lists %+v; want the lease of %s, attempt 1, until after its lease", running, leased)
	}
	if n := drain.Total(); n != 0 {
		t.Errorf("the drain counts %d attempts to wait for; a lease is not waited for", n)
	}

	drain.Partitions(events.NewPartitionSet(p))
	for _, m := range b.pull(pid, 30*time.Second) {
		t.Errorf("a pull of a draining partition handed out %s", m.GetDeliveryId())
	}
	if b.ack(pid, leased) != 1 {
		t.Errorf("the lease handed out before the drain could not be acknowledged")
	}
	b.waitStatus("acme", history.Succeeded, leased)
	waitUntil(t, "the drain lists nothing once the lease's outcome is recorded", func() bool { return len(drain.Running(p)) == 0 })
	drain.Partitions(events.PartitionSet{})
	if msgs := b.pullUntil(pid, 30*time.Second); len(msgs) != 1 || msgs[0].GetDeliveryId() != waiting {
		t.Errorf("once the drain ended the pull handed out %v; want %s", msgs, waiting)
	}
}

// readyForPull makes the pull endpoint's grain hold the deliveries of new
// events ready for its consumer, and returns them in their order: it waits
// for the grain to have caught up (a first delivery pulled and
// acknowledged), then hands it the events as the publish path does, while
// the projections (held at the log's head) have not applied them, so that
// it takes them at once from the hand-over. The projections go on after.
func (b *bench) readyForPull(fl *faultLog, pid *actor.PID, eventIDs ...string) []string {
	b.t.Helper()
	first := b.publish("acme", "warm_up", "ep_1")[0]
	if msgs := b.pullUntil(pid, 30*time.Second); len(msgs) != 1 || b.ack(pid, first) != 1 {
		b.t.Fatalf("the first pull handed out %d deliveries, or its ack failed", len(msgs))
	}
	head, err := b.log.Head(b.t.Context())
	if err != nil {
		b.t.Fatal(err)
	}
	fl.holdSubscription(&head)
	defer fl.holdSubscription(nil)
	var ids []string
	for _, id := range eventIDs {
		pub, plan := b.event("acme", id, "ep_1")
		ids = append(ids, b.append(pub, plan)...)
		b.sys.Root.Send(pid, &endpoint.Planned{Event: pub, Items: due.PlannedItems(plan), Position: b.planPosition(id)})
	}
	b.handled(pid)
	return ids
}

// handled returns once the grain has handled the messages sent to it
// before: its mailbox is in order, and a command's answer comes after.
func (b *bench) handled(pid *actor.PID) {
	b.t.Helper()
	mustOK(b.t, ask(b.t, b.sys, pid, cmd("acme", &controlv1.GetEndpointRequest{})))
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

// TestPushSlotAfterASwitchToPull: a delivery waiting for a slot of the
// node's dispatcher when its endpoint switches from push to pull is not
// pushed when the slot comes (the endpoint has no URL any more): the slot
// goes back, and the consumer's pull hands the delivery out, unattempted.
func TestPushSlotAfterASwitchToPull(t *testing.T) {
	b := newBench(t)
	d := dispatch.New(dispatch.Config{Slots: 1})
	b.cfg.Dispatcher = d
	release := make(chan struct{})
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	rc := newReceiver(t, gate(release, http.StatusOK, http.StatusOK))
	t.Cleanup(open) // before the receiver closes
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 2 })
	first := b.publish("acme", "evt_1", "ep_1")[0]
	rc.waitActive(t, 1) // in the node's only slot
	held := b.publish("acme", "evt_2", "ep_1")[0]
	waitUntil(t, "the second delivery waiting for a slot", func() bool { return d.Stats().Waiting[due.ClassNew] == 1 })

	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.UpdateEndpointRequest{
		Settings: &controlv1.EndpointSettings{Delivery: "pull"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"url", "delivery"}},
	})))
	open()
	b.waitStatus("acme", history.Succeeded, first)
	msgs := b.pullUntil(pid, 30*time.Second)
	if len(msgs) != 1 || msgs[0].GetDeliveryId() != held {
		t.Fatalf("the pull handed out %v; want %s", msgs, held)
	}
	if evs := b.delivery(held); len(evs) != 0 {
		t.Fatalf("the delivery recorded %s before its consumer pulled it; want nothing", typeNames(evs))
	}
	if b.ack(pid, held) != 1 {
		t.Fatal("the pulled delivery could not be acknowledged")
	}
	b.waitStatus("acme", history.Succeeded, held)
	if n := rc.count(held); n != 0 {
		t.Errorf("the delivery was pushed %d times after the switch to pull", n)
	}
	waitUntil(t, "the slot given back", func() bool { return d.Stats().Used == 0 })
}
