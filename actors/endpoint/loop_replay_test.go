package endpoint_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestReplay: a replay of a failed delivery adds a manual attempt with the
// same webhook-id; other tenants and unknown deliveries get NOT_FOUND.
func TestReplay(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusBadRequest))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	b.endpoint("globex", "ep_2", rc.URL+"/other", nil)
	id := b.publish("acme", "evt_1", "ep_1")[0]
	other := b.publish("globex", "evt_1", "ep_2")[0]
	b.waitStatus("acme", history.Failed, id)
	b.waitStatus("globex", history.Failed, other)

	for _, c := range []*internalv1.EndpointCommand{
		cmd("globex", &controlv1.ReplayDeliveryRequest{DeliveryId: id}),
		cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: "dlv_nope"}),
		cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: other}),
	} {
		if rep := ask(t, b.sys, pid, c); rep.GetError().GetCode() != internalv1.GrainError_CODE_NOT_FOUND {
			t.Fatalf("%v: %v, want NOT_FOUND", c, rep)
		}
	}

	rc.setRespond(status(http.StatusOK))
	by := &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_API_KEY, Id: "key_1"}
	c := cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: id})
	c.IssuedBy, c.RequestId = by, "req_replay"
	rep := mustOK(t, ask(t, b.sys, pid, c))
	if d := rep.GetDelivery(); d.GetDeliveryId() != id || d.GetStatus() != "pending" || d.GetAttemptCount() != 1 {
		t.Fatalf("replay answer: %v", rep)
	}
	evs := b.waitEvents(id, 3)
	rr, ok1 := evs[1].(*hooklinev1.ReplayRequested)
	s, ok2 := evs[2].(*hooklinev1.AttemptSucceeded)
	if !ok1 || !ok2 || rr.GetIssuedBy().GetId() != "key_1" || !s.GetAttempt().GetManual() || s.GetAttempt().GetNumber() != 2 ||
		s.GetAttempt().GetIssuedBy().GetId() != "key_1" {
		t.Fatalf("after replay: %s %v", typeNames(evs), evs)
	}
	hits := rc.all()
	var same int
	for _, h := range hits {
		if h.id == id {
			same++
		}
	}
	if same != 2 {
		t.Fatalf("the receiver saw webhook-id %s %d times, want 2 (original and replay)", id, same)
	}
	b.waitStatus("acme", history.Succeeded, id)

	// The same command again (its answer was lost, the node repeats it):
	// answered, and no second replay.
	if rep := mustOK(t, ask(t, b.sys, pid, c)); rep.GetDelivery().GetDeliveryId() != id {
		t.Fatalf("repeated replay answered %v", rep)
	}
	if evs := b.delivery(id); len(evs) != 3 || rc.count(id) != 2 {
		t.Fatalf("after the repeated replay: %s, %d requests", typeNames(evs), rc.count(id))
	}

	// A paused endpoint refuses replays.
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.PauseEndpointRequest{})))
	if rep := ask(t, b.sys, pid, cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: id})); rep.GetError().GetCode() != internalv1.GrainError_CODE_FAILED_PRECONDITION {
		t.Fatalf("replay while paused: %v", rep)
	}
}

// TestRecover: a bulk recovery replays the endpoint's failed deliveries in
// the range, and reports its progress.
func TestRecover(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusNotFound))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	var ids []string
	for _, e := range []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5"} {
		ids = append(ids, b.publish("acme", e, "ep_1")...)
	}
	b.waitStatus("acme", history.Failed, ids...)
	rc.setRespond(status(http.StatusOK))
	rep := mustOK(t, ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_Recover{Recover: &controlv1.RecoverEndpointRequest{
		Since: timestamppb.New(t0.Add(-time.Hour)), Until: timestamppb.New(t0.Add(time.Hour)),
	}}}))
	rid := rep.GetRecovery().GetRecoveryId()
	var rec *controlv1.Recovery
	waitUntil(t, "the recovery done and its attempts recorded", func() bool {
		rec = mustOK(t, ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_GetRecovery{GetRecovery: &controlv1.GetRecoveryRequest{RecoveryId: rid}}})).GetRecovery()
		return rec.GetDone() && rec.GetReplayed() == 5
	})
	if rec.GetFound() != 5 || rec.GetRequested() != 5 || rec.GetFinishedAt() == nil || rec.GetState() != "done" {
		t.Fatalf("recovery: %v", rec)
	}
	b.waitStatus("acme", history.Succeeded, ids...)
	for _, id := range ids {
		if rc.count(id) != 2 {
			t.Fatalf("%s: %d requests, want 2", id, rc.count(id))
		}
		if rr := b.delivery(id)[1].(*hooklinev1.ReplayRequested); rr.GetRecoveryId() != rid {
			t.Fatalf("replay of %s: %v", id, rr)
		}
	}
	if rep := ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_GetRecovery{GetRecovery: &controlv1.GetRecoveryRequest{RecoveryId: "rcv_nope"}}}); rep.GetError().GetCode() != internalv1.GrainError_CODE_NOT_FOUND {
		t.Fatalf("unknown recovery: %v", rep)
	}
}

// TestBreaker: the circuit opens after the threshold of consecutive
// failures, lets exactly one probe through after its cool-down, and closes
// when the probe succeeds; every transition is on the endpoint stream.
func TestBreaker(t *testing.T) {
	b := newBench(t)
	b.cfg.Breaker = endpoint.BreakerConfig{Threshold: 3, CoolDown: 10 * time.Second}
	rc := newReceiver(t, status(http.StatusBadGateway))
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 })
	var ids []string
	for _, e := range []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5"} {
		ids = append(ids, b.publish("acme", e, "ep_1")...)
	}
	waitUntil(t, "the circuit open", func() bool {
		return types(readStream(t, b.log, "ep_1")) == "EndpointCreated,CircuitOpened"
	})
	opened := decodeAll(t, b.log, "endpoint-ep_1")[1].(*hooklinev1.CircuitOpened)
	if opened.GetConsecutiveFailures() != 3 || opened.GetCoolDownMs() != 10_000 || !opened.GetUntil().AsTime().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("opened: %v", opened)
	}
	b.advance(5 * time.Second) // retries are due, the circuit is still open
	b.waitStatus("acme", history.Pending, ids...)
	if n := rc.count(""); n != 3 {
		t.Fatalf("%d requests while open, want the 3 that opened it", n)
	}

	// The probe fails: open again, twice as long.
	b.advance(5 * time.Second)
	waitUntil(t, "the circuit reopened", func() bool {
		return types(readStream(t, b.log, "ep_1")) == "EndpointCreated,CircuitOpened,CircuitHalfOpened,CircuitOpened"
	})
	if n := rc.count(""); n != 4 {
		t.Fatalf("%d requests, want 3 and one probe", n)
	}
	reopened := decodeAll(t, b.log, "endpoint-ep_1")[3].(*hooklinev1.CircuitOpened)
	if reopened.GetCoolDownMs() != 20_000 {
		t.Fatalf("reopened: %v", reopened)
	}

	// The next probe succeeds: closed, and everything flows.
	rc.setRespond(status(http.StatusOK))
	b.advance(20 * time.Second)
	b.waitStatus("acme", history.Succeeded, ids...)
	if got := types(readStream(t, b.log, "ep_1")); got != "EndpointCreated,CircuitOpened,CircuitHalfOpened,CircuitOpened,CircuitHalfOpened,CircuitClosed" {
		t.Fatalf("endpoint stream: %s", got)
	}
}

// TestTwoActivations: two activations of one endpoint attempt the same
// delivery; the one whose outcome lands second gets a wrong revision and
// stops. The delivery has one outcome.
func TestTwoActivations(t *testing.T) {
	b := newBench(t)
	var arrived atomic.Int32
	both := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		if arrived.Add(1) == 2 {
			close(both)
		}
		select {
		case <-both:
		case <-time.After(10 * time.Second):
		}
	})
	a := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	stale := b.spawn("ep_1")
	mustOK(t, ask(t, b.sys, stale, cmd("acme", &controlv1.GetEndpointRequest{})))
	stopped := watch(t, b.sys, a, stale)
	id := b.publish("acme", "evt_1", "ep_1")[0]
	select {
	case <-stopped:
	case <-time.After(15 * time.Second):
		t.Fatal("neither activation stopped")
	}
	b.waitStatus("acme", history.Succeeded, id)
	if evs := b.delivery(id); len(evs) != 1 {
		t.Fatalf("events %s", typeNames(evs))
	}
	if rc.count(id) != 2 {
		t.Fatalf("%d requests, want one per activation", rc.count(id))
	}
}

// watch returns a channel closed when any of pids stops.
func watch(t *testing.T, sys *actor.ActorSystem, pids ...*actor.PID) <-chan struct{} {
	t.Helper()
	ch := make(chan struct{})
	ready := make(chan struct{})
	var once atomic.Bool
	sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch c.Message().(type) {
		case *actor.Started:
			for _, p := range pids {
				c.Watch(p)
			}
			close(ready)
		case *actor.Terminated:
			if once.CompareAndSwap(false, true) {
				close(ch)
			}
		}
	}))
	<-ready
	return ch
}

// TestRecoverResumes: a recovery is durable: when the grain stops in the
// middle of it (its replays not recorded yet), the next activation finds
// it and finishes it, replaying each failed delivery once; while it runs,
// another recovery of the endpoint is refused. Before, recoveries lived in
// the grain's memory: the next activation answered NOT_FOUND, and two
// recoveries could replay the same deliveries.
func TestRecoverResumes(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	b.cfg.PullLimit = 2 // pages of 2
	rc := newReceiver(t, status(http.StatusNotFound))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	var ids []string
	for _, e := range []string{"evt_1", "evt_2", "evt_3", "evt_4", "evt_5"} {
		ids = append(ids, b.publish("acme", e, "ep_1")...)
	}
	b.waitStatus("acme", history.Failed, ids...)
	rc.setRespond(status(http.StatusOK))

	fl.holdAppends("delivery-") // the first page's replays cannot be recorded
	recover := &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_Recover{Recover: &controlv1.RecoverEndpointRequest{
		Since: timestamppb.New(t0.Add(-time.Hour)), Until: timestamppb.New(t0.Add(time.Hour)),
	}}}
	rid := mustOK(t, ask(t, b.sys, pid, recover)).GetRecovery().GetRecoveryId()
	if rep := ask(t, b.sys, pid, recover); rep.GetError().GetCode() != internalv1.GrainError_CODE_FAILED_PRECONDITION {
		t.Fatalf("a second recovery while %s runs: %v", rid, rep)
	}
	if err := b.sys.Root.StopFuture(pid).Wait(); err != nil { // a restart, a failover
		t.Fatal(err)
	}
	fl.releaseAppends()
	pid = b.spawn("ep_1")
	get := &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_GetRecovery{GetRecovery: &controlv1.GetRecoveryRequest{RecoveryId: rid}}}
	var rec *controlv1.Recovery
	waitUntil(t, "the recovery done by the next activation", func() bool {
		rec = mustOK(t, ask(t, b.sys, pid, get)).GetRecovery()
		return rec.GetDone()
	})
	if rec.GetFound() != 5 || rec.GetRequested() != 5 || rec.GetState() != "done" {
		t.Fatalf("recovery: %v", rec)
	}
	b.waitStatus("acme", history.Succeeded, ids...)
	for _, id := range ids {
		replays := 0
		for _, e := range b.delivery(id) {
			if rr, ok := e.(*hooklinev1.ReplayRequested); ok && rr.GetRecoveryId() == rid {
				replays++
			}
		}
		if replays != 1 || rc.count(id) != 2 {
			t.Fatalf("%s: %d replays, %d requests", id, replays, rc.count(id))
		}
	}
	list := mustOK(t, ask(t, b.sys, pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_ListRecoveries{ListRecoveries: &controlv1.ListRecoveriesRequest{}}}))
	if rs := list.GetRecoveries(); len(rs) != 1 || rs[0].GetRecoveryId() != rid || !rs[0].GetDone() {
		t.Fatalf("list: %v", rs)
	}
}

// TestReplayBounded: replays take room among the grain's flights; a replay
// command that finds the grain holding as many deliveries as it may is
// answered UNAVAILABLE. Before, every replay added a flight, unbounded.
func TestReplayBounded(t *testing.T) {
	b := newBench(t)
	b.cfg.PullLimit = 2 // with an in-flight limit of 1: 3 flights at most
	release := make(chan struct{})
	rc := newReceiver(t, status(http.StatusBadRequest))
	t.Cleanup(func() { close(release) }) // before the receiver closes
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 })
	var ids []string
	for i := range 4 {
		ids = append(ids, b.publish("acme", fmt.Sprint("evt_", i), "ep_1")...)
	}
	b.waitStatus("acme", history.Failed, ids...)
	rc.setRespond(func(w http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	for i, id := range ids {
		rep := ask(t, b.sys, pid, cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: id}))
		switch {
		case i < 3 && rep.GetError() != nil:
			t.Fatalf("replay %d: %v", i+1, rep)
		case i == 3 && rep.GetError().GetCode() != internalv1.GrainError_CODE_UNAVAILABLE:
			t.Fatalf("replay %d with the grain full: %v, want UNAVAILABLE", i+1, rep)
		}
	}
}
