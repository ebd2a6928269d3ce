package endpoint_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestLoopDelivers: every planned delivery ends succeeded, once, signed,
// with its delivery id as webhook-id; the counts add up.
func TestLoopDelivers(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusNoContent))
	b.endpoint("acme", "ep_1", rc.URL+"/in?token=x", nil)
	var ids []string
	for i := range 30 {
		ids = append(ids, b.publish("acme", fmt.Sprint("evt_", i), "ep_1")...)
	}
	b.waitStatus("acme", history.Succeeded, ids...)
	for _, id := range ids {
		evs := b.delivery(id)
		if len(evs) != 1 {
			t.Fatalf("%s: %d events, want one AttemptSucceeded", id, len(evs))
		}
		s, ok := evs[0].(*hooklinev1.AttemptSucceeded)
		if !ok || s.GetAttempt().GetNumber() != 1 || s.GetAttempt().GetManual() || s.GetAttempt().GetHttpStatus() != 204 ||
			len(s.GetAttempt().GetSecretVersions()) != 1 {
			t.Fatalf("%s: %v", id, evs[0])
		}
		if rc.count(id) != 1 {
			t.Fatalf("%s reached the receiver %d times", id, rc.count(id))
		}
	}
	for _, h := range rc.all() {
		if !strings.HasPrefix(h.signature, "v1,") || h.timestamp != fmt.Sprint(t0.Unix()) {
			t.Fatalf("hit %+v: want a v1 signature and the injected clock's timestamp", h)
		}
	}
	page, err := b.hist.Search(history.Query{TenantID: "acme", EndpointID: "ep_1", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	counts := map[history.Status]int{}
	for _, d := range page.Deliveries {
		counts[d.Status]++
	}
	if counts[history.Succeeded] != 30 || len(page.Deliveries) != 30 || rc.count("") != 30 {
		t.Fatalf("planned 30: %v in history, %d requests", counts, rc.count(""))
	}
}

// TestLoopRetries: retryable failures follow the schedule (full jitter at
// 0.5: 2.5 s, then 5 s), a 429's Retry-After is a floor, and nothing is
// attempted before its time.
func TestLoopRetries(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case r.URL.Path == "/busy" && n == 1:
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(http.StatusTooManyRequests)
		case r.URL.Path == "/flaky" && n <= 2:
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	b.endpoint("acme", "ep_flaky", rc.URL+"/flaky", nil)
	b.endpoint("acme", "ep_busy", rc.URL+"/busy", nil)
	flaky := b.publish("acme", "evt_1", "ep_flaky")[0]
	busy := b.publish("acme", "evt_2", "ep_busy")[0]

	evs := b.waitEvents(flaky, 1)
	f := evs[0].(*hooklinev1.AttemptFailed)
	if !f.GetRetryable() || f.GetAttempt().GetHttpStatus() != 500 || !f.GetNextAttemptAt().AsTime().Equal(t0.Add(2500*time.Millisecond)) {
		t.Fatalf("first failure: %v", f)
	}
	evs = b.waitEvents(busy, 1)
	f = evs[0].(*hooklinev1.AttemptFailed)
	if f.GetRetryAfterMs() != 120_000 || !f.GetNextAttemptAt().AsTime().Equal(t0.Add(120*time.Second)) {
		t.Fatalf("429 with Retry-After: %v", f)
	}

	b.advance(2500 * time.Millisecond)
	evs = b.waitEvents(flaky, 2)
	f = evs[1].(*hooklinev1.AttemptFailed)
	if f.GetAttempt().GetNumber() != 2 || !f.GetNextAttemptAt().AsTime().Equal(t0.Add(7500*time.Millisecond)) {
		t.Fatalf("second failure: %v", f)
	}
	if rc.count(busy) != 1 {
		t.Fatalf("the 429'd delivery was attempted %d times before its Retry-After", rc.count(busy))
	}
	b.advance(5 * time.Second)
	evs = b.waitEvents(flaky, 3)
	if s, ok := evs[2].(*hooklinev1.AttemptSucceeded); !ok || s.GetAttempt().GetNumber() != 3 {
		t.Fatalf("third attempt: %v", evs[2])
	}
	if rc.count(busy) != 1 {
		t.Fatalf("the 429'd delivery was attempted %d times before its Retry-After", rc.count(busy))
	}
	b.advance(113 * time.Second)
	b.waitStatus("acme", history.Succeeded, flaky, busy)
	if n := rc.count(busy); n != 2 {
		t.Fatalf("busy: %d requests, want 2", n)
	}
}

// TestLoopPermanent: 3xx and 4xx end a delivery at once; 410 also pauses
// the endpoint, whose later deliveries stay due.
func TestLoopPermanent(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		switch r.URL.Path {
		case "/moved":
			w.Header().Set("Location", "https://elsewhere.example/")
			w.WriteHeader(http.StatusFound)
		case "/bad":
			w.WriteHeader(http.StatusBadRequest)
		case "/gone":
			w.WriteHeader(http.StatusGone)
		}
	})
	b.endpoint("acme", "ep_moved", rc.URL+"/moved", nil)
	b.endpoint("acme", "ep_bad", rc.URL+"/bad", nil)
	gonePID := b.endpoint("acme", "ep_gone", rc.URL+"/gone", nil)
	ids := b.publish("acme", "evt_1", "ep_moved", "ep_bad", "ep_gone")
	b.waitStatus("acme", history.Failed, ids...)
	for i, want := range []int32{302, 400, 410} {
		evs := b.delivery(ids[i])
		f, ok := evs[0].(*hooklinev1.AttemptFailed)
		if len(evs) != 1 || !ok || f.GetRetryable() || f.GetNextAttemptAt() != nil || f.GetAttempt().GetHttpStatus() != want {
			t.Fatalf("%d: %v", want, evs)
		}
		if rc.count(ids[i]) != 1 {
			t.Fatalf("%d: %d requests", want, rc.count(ids[i]))
		}
	}
	waitUntil(t, "the endpoint paused", func() bool {
		return types(readStream(t, b.log, "ep_gone")) == "EndpointCreated,EndpointPaused"
	})
	paused := decodeAll(t, b.log, "endpoint-ep_gone")[1].(*hooklinev1.EndpointPaused)
	if paused.GetReason() != hooklinev1.EndpointPaused_REASON_GONE || paused.GetDeliveryId() != ids[2] {
		t.Fatalf("pause: %v", paused)
	}
	rep := mustOK(t, ask(t, b.sys, gonePID, cmd("acme", &controlv1.GetEndpointRequest{})))
	if rep.GetEndpoint().GetStatus() != controlv1.Endpoint_STATUS_PAUSED {
		t.Fatalf("status %v", rep.GetEndpoint().GetStatus())
	}
	// A paused endpoint attempts nothing: the new delivery stays pending.
	later := b.publish("acme", "evt_2", "ep_gone")[0]
	b.waitStatus("acme", history.Pending, later)
	b.advance(time.Minute)
	mustOK(t, ask(t, b.sys, gonePID, cmd("acme", &controlv1.GetEndpointRequest{}))) // the wake was handled
	if rc.count(later) != 0 || len(b.delivery(later)) != 0 {
		t.Fatalf("a paused endpoint attempted %s", later)
	}
}

// TestLoopDeadline: a delivery found past its expires_at ends with
// DeliveryExpired and no attempt; one that keeps failing ends failed at
// the 24 h deadline.
func TestLoopDeadline(t *testing.T) {
	b := newBench(t)
	b.cfg.Schedule.Base, b.cfg.Schedule.Cap, b.cfg.Schedule.MaxAttempts = time.Hour, 8*time.Hour, 100
	rc := newReceiver(t, status(http.StatusServiceUnavailable))

	// Paused when the event comes, resumed a day later.
	late := b.endpoint("acme", "ep_late", rc.URL+"/late", nil)
	mustOK(t, ask(t, b.sys, late, cmd("acme", &controlv1.PauseEndpointRequest{})))
	expired := b.publish("acme", "evt_1", "ep_late")[0]
	b.clk.Add(25 * time.Hour)
	mustOK(t, ask(t, b.sys, late, cmd("acme", &controlv1.ResumeEndpointRequest{})))
	evs := b.waitEvents(expired, 1)
	if e, ok := evs[0].(*hooklinev1.DeliveryExpired); !ok || e.GetAttempts() != 0 || !e.GetExpiresAt().AsTime().Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("expired: %v", evs)
	}
	if rc.count(expired) != 0 {
		t.Fatal("an expired delivery was attempted")
	}
	b.waitStatus("acme", history.Failed, expired)

	// Failing until the deadline.
	b.endpoint("acme", "ep_down", rc.URL+"/down", nil)
	start := b.clk.Now()
	id := b.publish("acme", "evt_2", "ep_down")[0]
	for n := 1; ; n++ {
		evs := b.waitEvents(id, n)
		f := evs[n-1].(*hooklinev1.AttemptFailed)
		if f.GetAttempt().GetNumber() != int32(n) {
			t.Fatalf("attempt %d numbered %d", n, f.GetAttempt().GetNumber())
		}
		if f.GetNextAttemptAt() == nil {
			if at := f.GetAttempt().GetStartedAt().AsTime(); !at.Equal(start.Add(24 * time.Hour)) {
				t.Fatalf("the last attempt ran at %v, want at the deadline %v", at, start.Add(24*time.Hour))
			}
			break
		}
		next := f.GetNextAttemptAt().AsTime()
		if next.After(start.Add(24 * time.Hour)) {
			t.Fatalf("retry %d scheduled at %v, past the deadline", n, next)
		}
		b.advance(next.Sub(b.clk.Now()))
		if n > 20 {
			t.Fatal("too many attempts")
		}
	}
	b.waitStatus("acme", history.Failed, id)
}

// types lists event type names, for messages.
func typeNames(msgs []proto.Message) string {
	var out []string
	for _, m := range msgs {
		out = append(out, string(m.ProtoReflect().Descriptor().Name()))
	}
	return strings.Join(out, ",")
}

// TestLoopDeleted: a deleted endpoint ends its due deliveries as failed
// with ERROR_CLASS_ENDPOINT_GONE, without an HTTP attempt.
func TestLoopDeleted(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusOK))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.PauseEndpointRequest{})))
	ids := append(b.publish("acme", "evt_1", "ep_1"), b.publish("acme", "evt_2", "ep_1")...)
	b.waitStatus("acme", history.Pending, ids...)
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.DeleteEndpointRequest{})))
	b.waitStatus("acme", history.Failed, ids...)
	for _, id := range ids {
		f := b.delivery(id)[0].(*hooklinev1.AttemptFailed)
		if f.GetAttempt().GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE || f.GetNextAttemptAt() != nil || f.GetAttempt().GetHttpStatus() != 0 {
			t.Fatalf("%s: %v", id, f)
		}
	}
	if rc.count("") != 0 {
		t.Fatalf("%d requests to a deleted endpoint", rc.count(""))
	}
}

// gate is a receiver's handler for tests that hold attempts: the first
// request of each delivery waits until release is closed, then answers
// code; later ones answer later.
func gate(release <-chan struct{}, code, later int) func(w http.ResponseWriter, r *http.Request, n int) {
	return func(w http.ResponseWriter, r *http.Request, n int) {
		if n == 1 {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			w.WriteHeader(code)
			return
		}
		w.WriteHeader(later)
	}
}

// waitActive waits until the receiver has n requests in progress.
func (rc *receiver) waitActive(t *testing.T, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d requests in progress", n), func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.active == n
	})
}

// TestLoopDeletedWhileHeld: a delivery the grain holds, waiting for a slot,
// when the endpoint is deleted ends failed (ENDPOINT_GONE) without an
// attempt; the one attempting when the delete came is recorded as it
// answered. Before, the held one stayed pending for as long as the grain
// lived.
func TestLoopDeletedWhileHeld(t *testing.T) {
	b := newBench(t)
	d := dispatch.New(dispatch.Config{Slots: 1})
	b.cfg.Dispatcher = d
	release := make(chan struct{})
	rc := newReceiver(t, gate(release, http.StatusOK, http.StatusOK))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 2 })
	first := b.publish("acme", "evt_1", "ep_1")[0]
	rc.waitActive(t, 1) // in the node's only slot
	held := b.publish("acme", "evt_2", "ep_1")[0]
	waitUntil(t, "the second delivery waiting for a slot", func() bool { return d.Stats().Waiting[due.ClassNew] == 1 })
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.DeleteEndpointRequest{})))
	close(release)
	b.waitStatus("acme", history.Succeeded, first)
	b.waitStatus("acme", history.Failed, held)
	f := b.delivery(held)[0].(*hooklinev1.AttemptFailed)
	if f.GetAttempt().GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE || rc.count(held) != 0 {
		t.Fatalf("%s: %v, %d requests", held, f, rc.count(held))
	}
	// Later deliveries of the deleted endpoint end the same way.
	later := b.publish("acme", "evt_3", "ep_1")[0]
	b.waitStatus("acme", history.Failed, later)
	if d.Stats().Used != 0 {
		t.Fatalf("slots still held: %+v", d.Stats())
	}
}

// TestLoopNoAttemptPastDeadline: a delivery held while the endpoint is
// paused, resumed after its deadline, ends DeliveryExpired without an HTTP
// attempt. Before, the held flight was attempted on resume.
func TestLoopNoAttemptPastDeadline(t *testing.T) {
	b := newBench(t)
	release := make(chan struct{})
	rc := newReceiver(t, gate(release, http.StatusOK, http.StatusOK))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 })
	ids := append(b.publish("acme", "evt_1", "ep_1"), b.publish("acme", "evt_2", "ep_1")...)
	rc.waitActive(t, 1)
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.PauseEndpointRequest{})))
	close(release)
	var done, late string
	waitUntil(t, "the attempt under way recorded", func() bool {
		for i, id := range ids {
			if len(b.delivery(id)) == 1 {
				done, late = id, ids[1-i]
				return true
			}
		}
		return false
	})
	b.clk.Add(25 * time.Hour)
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.ResumeEndpointRequest{})))
	evs := b.waitEvents(late, 1)
	if e, ok := evs[0].(*hooklinev1.DeliveryExpired); !ok || e.GetAttempts() != 0 {
		t.Fatalf("the held delivery: %s %v, want DeliveryExpired", typeNames(evs), evs)
	}
	if rc.count(late) != 0 || rc.count(done) != 1 {
		t.Fatalf("requests: %d for the expired delivery, %d for the other", rc.count(late), rc.count(done))
	}
}

// TestLoopEventNotYetVisible: a new delivery whose event stream a lagging
// backend does not show yet stays due and is delivered once it shows it.
// Before, it ended failed at once, as if the log's retention had removed
// the event.
func TestLoopEventNotYetVisible(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	rc := newReceiver(t, status(http.StatusOK))
	b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	fl.missReads(events.EventStream("acme", "evt_1"), 1)
	id := b.publish("acme", "evt_1", "ep_1")[0]
	waitUntil(t, "the event read, and missed", func() bool {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		return fl.missing[events.EventStream("acme", "evt_1")] == 0
	})
	b.advance(10 * time.Second) // past the grain's short wait before reading again
	b.waitStatus("acme", history.Succeeded, id)
	if evs := b.delivery(id); len(evs) != 1 || rc.count(id) != 1 {
		t.Fatalf("%s, %d requests", typeNames(evs), rc.count(id))
	}
}

// TestLoopReplanned: an event id published again after its event stream
// expired (its delivery stream survived, ended) plans the same delivery id
// again: it is attempted, its outcome recorded after the old ones. Before,
// the grain read the ended stream and dropped it on every pull, and it
// stayed pending forever.
func TestLoopReplanned(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusOK))
	b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	id := b.publish("acme", "evt_1", "ep_1")[0]
	b.waitStatus("acme", history.Succeeded, id)
	// The event stream expired; the same event id is published again. Its
	// new event stream is written here under another name (the embedded
	// log keeps the old one), with the same delivery planned.
	b.clk.Add(31 * 24 * time.Hour)
	at := timestamppb.New(b.clk.Now())
	plan := &hooklinev1.DeliveriesPlanned{TenantId: "acme", EventId: "evt_1", EventType: "invoice.paid", Chunks: 1, At: at,
		ExpiresAt:  timestamppb.New(b.clk.Now().Add(24 * time.Hour)),
		Deliveries: []*hooklinev1.PlannedDelivery{{DeliveryId: id, EndpointId: "ep_1", ConfigVersion: 1}}}
	ev, err := events.Encode(plan, "replan/evt_1", "event-acme.evt_1_again")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.log.Append(t.Context(), "event-acme.evt_1_again", events.NoStream{}, ev); err != nil {
		t.Fatal(err)
	}
	evs := b.waitEvents(id, 2)
	if s, ok := evs[1].(*hooklinev1.AttemptSucceeded); !ok || s.GetAttempt().GetNumber() != 2 || rc.count(id) != 2 {
		t.Fatalf("after the new plan: %s, %d requests", typeNames(evs), rc.count(id))
	}
}
