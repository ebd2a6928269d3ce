package endpoint_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestGrainRetiresAfterItsRunningAttempts: a grain retired by the
// placement (its partition moved) answers no command, starts no attempt,
// records the outcome of the attempt it has running once the receiver
// answers, and then stops. Before, it was stopped at once, and its attempt
// was cut.
func TestGrainRetiresAfterItsRunningAttempts(t *testing.T) {
	b := newBench(t)
	release := make(chan struct{})
	rc := newReceiver(t, gate(release, http.StatusOK, http.StatusOK))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	running := b.publish("acme", "evt_1", "ep_1")[0]
	rc.waitActive(t, 1)

	b.sys.Root.Send(pid, cluster.Retire{})
	rep := ask(t, b.sys, pid, cmd("acme", &controlv1.GetEndpointRequest{}))
	if rep.GetError().GetCode() != internalv1.GrainError_CODE_UNAVAILABLE {
		t.Fatalf("a retiring grain answered a command with %v; want UNAVAILABLE (the new owner answers)", rep)
	}
	later := b.publish("acme", "evt_2", "ep_1")[0] // the new owner's
	close(release)
	b.waitStatus("acme", history.Succeeded, running)
	waitUntil(t, "the retired grain stops", func() bool {
		_, alive := b.sys.ProcessRegistry.GetLocal(pid.Id)
		return !alive
	})
	if n := rc.count(running); n != 1 {
		t.Errorf("the running attempt reached the receiver %d times; want once", n)
	}
	if n := rc.count(later); n != 0 {
		t.Errorf("the retiring grain attempted a delivery planned after its retirement (%d requests)", n)
	}
}

// TestLoopWaitsForItsPredecessorsAttempts: a grain that starts where its
// partition was handed over while the previous owner still ran an attempt
// (Config.StillRunning) does not attempt that delivery, and counts it
// against its in-flight limit, until the previous owner's outcome is
// applied: the due index then wakes it, and it attempts the delivery that
// waited for room at once.
func TestLoopWaitsForItsPredecessorsAttempts(t *testing.T) {
	b := newBench(t)
	release := make(chan struct{})
	rc := newReceiver(t, gate(release, http.StatusOK, http.StatusOK))
	oneAtATime := func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 }

	// The previous owner: its grain attempts, then its partition drains.
	drain := &endpoint.Drain{}
	b.cfg.Drain = drain
	b.endpoint("acme", "ep_1", rc.URL+"/in", oneAtATime)
	held := b.publish("acme", "evt_1", "ep_1")[0]
	rc.waitActive(t, 1)
	drain.Partitions(events.NewPartitionSet(events.PartitionOf("ep_1")))
	left := drain.Running(events.PartitionOf("ep_1"))
	if len(left) != 1 || left[0].DeliveryID != held || left[0].Attempt != 1 {
		t.Fatalf("the drain lists %+v as running; want the attempt 1 of %s", left, held)
	}

	// The new owner's grain.
	b.cfg.Drain = nil
	b.cfg.StillRunning = func(endpointID string) []endpoint.Running {
		if endpointID != "ep_1" {
			return nil
		}
		return left
	}
	b.cfg.Outcomes = b.cfg.Due.(*due.Due)
	b.spawn("ep_1")
	next := b.publish("acme", "evt_2", "ep_1")[0]
	// A witness: another endpoint's delivery, planned after it, arrives.
	b.endpoint("acme", "ep_2", rc.URL+"/in", nil)
	witness := b.publish("acme", "evt_3", "ep_2")[0]
	waitUntil(t, "the witness delivery", func() bool { return rc.count(witness) == 1 })
	if n := rc.count(next); n != 0 {
		t.Fatalf("the new grain attempted %s while the previous owner's attempt ran: its in-flight limit of 1 counts that attempt", next)
	}

	close(release) // the previous owner records its outcome
	b.waitStatus("acme", history.Succeeded, held, next)
	if n := rc.count(held); n != 1 {
		t.Errorf("the previous owner's delivery reached the receiver %d times; want once", n)
	}
}

// TestLoopAttemptsOnceItsPredecessorsTimeIsOut: a delivery the previous
// owner was attempting when it handed the partition over, and whose
// outcome never came (that member died), is attempted by the new grain
// once that attempt's Until has passed, not before.
func TestLoopAttemptsOnceItsPredecessorsTimeIsOut(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	b.endpoint("acme", "ep_2", rc.URL+"/in", nil)
	// Created by a grain that then stops: the previous owner.
	b.sys.Root.StopFuture(b.endpoint("acme", "ep_1", rc.URL+"/in", nil)).Wait()
	d := b.publish("acme", "evt_1", "ep_1")[0]
	until := b.clk.Now().Add(5 * time.Second)
	b.cfg.StillRunning = func(endpointID string) []endpoint.Running {
		return []endpoint.Running{{EndpointID: "ep_1", DeliveryID: d, Attempt: 1, Until: until}}
	}
	b.cfg.Outcomes = b.cfg.Due.(*due.Due)
	b.spawn("ep_1")

	b.advance(4 * time.Second)
	witness := b.publish("acme", "evt_2", "ep_1", "ep_2")
	b.waitStatus("acme", history.Succeeded, witness...)
	if n := rc.count(d); n != 0 {
		t.Fatalf("the delivery was attempted %d times before the previous owner's attempt ran out of time", n)
	}
	b.advance(2 * time.Second)
	b.waitStatus("acme", history.Succeeded, d)
	if n := rc.count(d); n != 1 {
		t.Errorf("the delivery reached the receiver %d times; want once", n)
	}
}

// TestSkipWaitsForThePredecessorsAttempt: a skip of an ordering key's head
// that reaches the grain before it has caught up, while the partition's
// previous owner may still be attempting that head, is not carried out
// under that attempt: it waits until the grain knows which deliveries its
// predecessor holds, and is then refused as a skip under the grain's own
// attempt is (UNAVAILABLE: the caller retries). Before, the skip ended the
// head while the previous owner still sent it, and the key's next delivery
// could go out beside it.
func TestSkipWaitsForThePredecessorsAttempt(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusOK))
	// Created by a grain that then stops: the previous owner.
	b.sys.Root.StopFuture(b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.Ordering = "key" })).Wait()
	var heads []string
	for _, id := range []string{"evt_1", "evt_2"} {
		pub, plan := b.event("acme", id, "ep_1")
		pub.OrderingKey, plan.OrderingKey = "k", "k"
		plan.GetDeliveries()[0].Ordering = hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE
		heads = append(heads, b.append(pub, plan)...)
	}
	head := heads[0]
	d := b.cfg.Due.(*due.Due)
	waitUntil(t, "the key's head in the index", func() bool {
		k, ok, err := d.Key("ep_1", "k")
		return err == nil && ok && k.Head == head && b.status("acme", head).ID == head
	})

	// The new owner's grain: its catch-up waits until released; the
	// previous owner still attempts the head.
	release := make(chan struct{})
	b.cfg.CatchUpTo = func(ctx context.Context, _ events.Partition) (events.Position, error) {
		select {
		case <-release:
		case <-ctx.Done():
			return events.Position{}, ctx.Err()
		}
		return b.log.Head(ctx)
	}
	until := b.clk.Now().Add(5 * time.Second)
	b.cfg.StillRunning = func(string) []endpoint.Running {
		return []endpoint.Running{{EndpointID: "ep_1", DeliveryID: head, Attempt: 1, Until: until}}
	}
	b.cfg.Outcomes, b.cfg.OrderingKeys = d, d
	watch := &logWatch{}
	b.cfg.Logger = slog.New(watch)
	pid := b.spawn("ep_1")
	answered := make(chan *internalv1.EndpointReply, 1)
	go func() {
		res, _ := b.sys.Root.RequestFuture(pid, cmd("acme", &controlv1.SkipOrderingKeyRequest{OrderingKey: "k", HeadDeliveryId: head}), 10*time.Second).Result()
		rep, _ := res.(*internalv1.EndpointReply)
		answered <- rep
	}()
	var rep *internalv1.EndpointReply
	waitUntil(t, "the skip answered, or waiting for the catch-up", func() bool {
		select {
		case rep = <-answered:
			return true
		default:
			return watch.saw("skip waits")
		}
	})
	close(release)
	if rep == nil {
		rep = <-answered
	}
	if rep.GetError().GetCode() != internalv1.GrainError_CODE_UNAVAILABLE {
		t.Fatalf("a skip of the head the previous owner still attempts answered %v; want UNAVAILABLE (retry)", rep)
	}
	if evs := b.delivery(head); len(evs) != 0 {
		t.Fatalf("the head's stream holds %s; want nothing while the previous owner attempts it", typeNames(evs))
	}
	b.advance(6 * time.Second) // the previous owner's attempt is out of time
	b.waitStatus("acme", history.Succeeded, heads...)
	if n := rc.count(head); n != 1 {
		t.Errorf("the head reached the receiver %d times; want once, from the new owner", n)
	}
}
