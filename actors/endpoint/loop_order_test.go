package endpoint_test

import (
	"context"

	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// publishKeyed appends an event with an ordering key planned for an
// endpoint that orders by key (under o), as the publish handler does, and
// returns its delivery id.
func (b *bench) publishKeyed(tenant, eventID, key, endpointID string, o hooklinev1.KeyOrdering) string {
	b.t.Helper()
	pub, plan := b.event(tenant, eventID, endpointID)
	pub.OrderingKey, plan.OrderingKey, plan.Deliveries[0].Ordering = key, key, o
	return b.append(pub, plan)[0]
}

// sequences lists the webhook-sequence of each request the receiver got
// for a delivery, in order.
func (rc *receiver) sequences(id string) []string {
	var out []string
	for _, h := range rc.all() {
		if h.id == id {
			out = append(out, h.key+"#"+h.sequence)
		}
	}
	return out
}

// waitStream polls the log for up to a few seconds for stream to hold an
// event, and reports whether it did.
func waitStream(log events.Log, stream string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		recs, err := log.ReadStream(context.Background(), stream, events.Forwards, 0, 1)
		if err == nil && len(recs) > 0 {
			return true
		}
	}
	return false
}

// TestOrderedSequenceOutlivesRetention: a key's next delivery carries one
// more than the last sequence the key was ever sent with, whatever the
// log still holds: the key's first deliveries are sent with 1 and 2, the
// grain checkpoints the key's count once it has waited, retention drops
// their events and streams, and a member that builds the partition from
// what is left (a joining member, a replaced disk, a repair) sends the
// key's next delivery with 3. Before, it numbered the key from the plans
// the log still held, and sent 1: a receiver took it for a repeat.
func TestOrderedSequenceOutlivesRetention(t *testing.T) {
	b := newBench(t)
	rc := newReceiver(t, status(http.StatusOK))
	cont := hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.Ordering = "key" })
	first := []string{b.publishKeyed("acme", "evt_1", "cus_7", "ep_1", cont), b.publishKeyed("acme", "evt_2", "cus_7", "ep_1", cont)}
	b.waitStatus("acme", history.Succeeded, first...)
	for i, id := range first {
		if got, want := rc.sequences(id), "cus_7#"+string(rune('1'+i)); len(got) != 1 || got[0] != want {
			t.Fatalf("delivery %d of the key was sent as %v, want [%s]", i+1, got, want)
		}
	}

	// Later, the index wakes the grain to checkpoint the key's count.
	b.advance(11 * time.Minute)
	if !waitStream(b.log, events.OrderingStream("ep_1")) {
		t.Errorf("no checkpoint in %s", events.OrderingStream("ep_1"))
	}
	// Retention drops the key's deliveries, and their events.
	var doomed []string
	for i, id := range first {
		doomed = append(doomed, events.DeliveryStream(id), events.EventStream("acme", []string{"evt_1", "evt_2"}[i]))
	}
	if _, err := b.log.(events.StreamDropper).DropStreams(context.Background(), doomed); err != nil {
		t.Fatal(err)
	}
	// Another member builds the partition from the log, and serves it.
	if err := b.sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	b.rebuild()
	b.spawn("ep_1")
	next := b.publishKeyed("acme", "evt_3", "cus_7", "ep_1", cont)
	b.waitStatus("acme", history.Succeeded, next)
	if got := rc.sequences(next); len(got) != 1 || got[0] != "cus_7#3" {
		t.Errorf("the key's next delivery was sent as %v, want [cus_7#3]", got)
	}
}

// TestOrderedWaitersOutliveDeadline: deliveries that waited behind a
// parked key longer than their 24 hours are delivered, in order, once a
// replay of the head releases the key: each gets its 24 hours from its
// turn. Before, each ended expired with no attempt and parked the key
// again.
func TestOrderedWaitersOutliveDeadline(t *testing.T) {
	b := newBench(t)
	var refuse atomic.Bool
	refuse.Store(true)
	park := hooklinev1.KeyOrdering_KEY_ORDERING_PARK
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("webhook-sequence") == "1" && refuse.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) {
		s.Ordering, s.KeyFailure, s.MaxAttempts = "key", "park", 1
	})
	head := b.publishKeyed("acme", "evt_1", "k", "ep_1", park)
	waiting := []string{b.publishKeyed("acme", "evt_2", "k", "ep_1", park), b.publishKeyed("acme", "evt_3", "k", "ep_1", park)}
	b.waitStatus("acme", history.Failed, head)

	b.advance(30 * time.Hour)
	refuse.Store(false)
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: head})))
	b.waitStatus("acme", history.Succeeded, append([]string{head}, waiting...)...)
	for i, id := range waiting {
		if got, want := rc.sequences(id), "k#"+string(rune('2'+i)); len(got) != 1 || got[0] != want {
			t.Errorf("waiting delivery %d was sent as %v, want [%s]", i+1, got, want)
		}
	}
}

// TestOrderedReplayKeepsKey: a replay of a parked key's head that another
// activation attempts (the grain stopped after recording the replay: a
// restart, a partition moving) carries the key and the sequence the head
// was sent with, and its success releases the key. Before, that attempt
// carried neither: the key stayed parked for good.
func TestOrderedReplayKeepsKey(t *testing.T) {
	b := newBench(t)
	park := hooklinev1.KeyOrdering_KEY_ORDERING_PARK
	replayed, release := make(chan struct{}), make(chan struct{})
	var hits atomic.Int32
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("webhook-event-id") != "evt_1" {
			w.WriteHeader(http.StatusOK)
			return
		}
		switch hits.Add(1) {
		case 1:
			w.WriteHeader(http.StatusBadRequest)
		case 2: // the replay: held until its grain is gone
			close(replayed)
			select {
			case <-release:
			case <-r.Context().Done():
			}
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	t.Cleanup(func() { close(release) }) // before the receiver closes
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) {
		s.Ordering, s.KeyFailure, s.MaxAttempts = "key", "park", 1
	})
	head := b.publishKeyed("acme", "evt_1", "k", "ep_1", park)
	next := b.publishKeyed("acme", "evt_2", "k", "ep_1", park)
	b.waitStatus("acme", history.Failed, head)
	mustOK(t, ask(t, b.sys, pid, cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: head})))
	select {
	case <-replayed:
	case <-time.After(15 * time.Second):
		t.Fatal("the replay was not attempted")
	}
	if err := b.sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	b.spawn("ep_1")
	b.waitStatus("acme", history.Succeeded, head)
	got := rc.sequences(head)
	if len(got) != 3 || got[2] != "k#1" {
		t.Errorf("the head's requests carried %v; want its replay by the next activation to carry k#1", got)
	}
	var last *hooklinev1.AttemptSucceeded
	for _, m := range b.delivery(head) {
		if s, ok := m.(*hooklinev1.AttemptSucceeded); ok {
			last = s
		}
	}
	if last == nil || last.GetAttempt().GetOrderingKey() != "k" || last.GetAttempt().GetSequence() != 1 {
		t.Errorf("the replay's recorded attempt: %v; want ordering key k and sequence 1", last)
	}
	b.waitStatus("acme", history.Succeeded, next)
	if got := rc.sequences(next); len(got) != 1 || got[0] != "k#2" {
		t.Errorf("the key's next delivery was sent as %v, want [k#2]", got)
	}
}
