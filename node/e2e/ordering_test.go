package e2e_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// publishKeyed publishes one event with an ordering key.
func (c *tenantClient) publishKeyed(t *testing.T, eventID, eventType, key string) []string {
	t.Helper()
	res, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{
		EventId: eventID, Type: eventType, OrderingKey: key, Payload: fmt.Appendf(nil, `{"event":%q}`, eventID),
	})
	if err != nil {
		t.Errorf("publish %s: %v", eventID, err)
		return nil
	}
	return c.remember(res)
}

// checkKeyOrder checks the requests one key's deliveries made, in arrival
// order: each carries the key, the sequence never goes back, a new one
// follows the last by one, a repeat is only of the last one, and sequence
// s is the key's event s (its events were published one after another).
func checkKeyOrder(t *testing.T, key string, got []receipt, events int) {
	t.Helper()
	last := int64(0)
	for _, r := range got {
		want := fmt.Sprintf("ev_%s_%d", key, r.sequence)
		switch {
		case r.sequence != last && r.sequence != last+1:
			t.Errorf("key %s: sequence %d arrived after %d", key, r.sequence, last)
		case r.eventID != want:
			t.Errorf("key %s: sequence %d carried event %s, want %s", key, r.sequence, r.eventID, want)
		}
		last = max(last, r.sequence)
	}
	if last != int64(events) {
		t.Errorf("key %s: last sequence received %d, want %d", key, last, events)
	}
}

// TestOrderingByKey: an endpoint ordered by key gets each key's deliveries
// one at a time, in the order their events were published, from several
// concurrent producers; one key whose receiver refuses holds back its own
// later deliveries only, which then arrive in order; a delivery waiting for
// its turn cannot be replayed ahead of it; every delivery arrives (lost 0)
// and history shows each one's key and sequence. The receiver checks every
// signature.
func TestOrderingByKey(t *testing.T) {
	const (
		producers = 4
		keysEach  = 10
		perKey    = 8
		failKey   = "kfail"
	)
	rc := newHookReceiver(t, nil)
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 50 * time.Millisecond, Cap: 300 * time.Millisecond, MaxAttempts: 100}})
	c := n.tenant(t, "acme", &hooklinev1.Quota{AttemptsPerSecond: 5000, MaxInFlight: 1000})
	var failing atomic.Bool
	failing.Store(true)
	c.endpoint(t, rc, "ep_ordered", []string{"order.updated"}, func(s *controlv1.EndpointSettings) {
		s.Ordering, s.RatePerSecond, s.Burst, s.MaxAttempts = "key", 2000, 200, 100
	}, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("webhook-ordering-key") == failKey && failing.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})

	for _, bad := range []string{strings.Repeat("k", 257), "line\nbreak"} {
		_, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{EventId: "ev_bad", Type: "order.updated", OrderingKey: bad, Payload: []byte(`{}`)})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ordering_key") {
			t.Errorf("publish with ordering key %q: %v, want INVALID_ARGUMENT naming ordering_key", bad, err)
		}
	}

	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			keys := []string{}
			for k := range keysEach {
				keys = append(keys, fmt.Sprintf("k%d_%d", p, k))
			}
			if p == 0 {
				keys = append(keys, failKey)
			}
			for i := 1; i <= perKey; i++ {
				for _, k := range keys {
					c.publishKeyed(t, fmt.Sprintf("ev_%s_%d", k, i), "order.updated", k)
				}
			}
		})
	}
	wg.Wait()
	planned := c.plannedIDs()
	if want := (producers*keysEach + 1) * perKey; len(planned) != want {
		t.Fatalf("planned %d deliveries, want %d", len(planned), want)
	}
	byKey := func() map[string][]receipt {
		out := map[string][]receipt{}
		for _, r := range rc.onPathReceipts("/ep_ordered") {
			out[r.orderingKey] = append(out[r.orderingKey], r)
		}
		return out
	}
	// Every other key completes while the failing key's head is refused.
	eventually(t, 60*time.Second, "every key but the failing one delivered", func() bool {
		got := byKey()
		for p := range producers {
			for k := range keysEach {
				rs := got[fmt.Sprintf("k%d_%d", p, k)]
				if len(rs) == 0 || rs[len(rs)-1].sequence != perKey || rs[len(rs)-1].status >= 300 {
					return false
				}
			}
		}
		return len(got[failKey]) >= 3
	})
	if blocked := n.metric(t, "hookline_ordering_blocked_keys"); blocked != 1 {
		t.Errorf("hookline_ordering_blocked_keys = %v while one key's head is refused, want 1", blocked)
	}
	for _, r := range byKey()[failKey] {
		if r.sequence != 1 || r.status != http.StatusServiceUnavailable {
			t.Fatalf("while its head was refused, the failing key's delivery sequence %d was sent (answered %d)", r.sequence, r.status)
		}
	}
	// A delivery waiting for its turn cannot be replayed ahead of it.
	waiting := deliveryOf(t, c, "ev_kfail_5")
	_, err := c.deliveries.ReplayDelivery(c.ctx(), &controlv1.ReplayDeliveryRequest{DeliveryId: waiting})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("replay of a delivery waiting for its turn: %v, want FailedPrecondition", err)
	}

	failing.Store(false)
	eventually(t, 60*time.Second, "the failing key's deliveries, once it recovers", func() bool {
		rs := byKey()[failKey]
		return len(rs) > 0 && rs[len(rs)-1].sequence == perKey && rs[len(rs)-1].status < 300
	})
	got := byKey()
	for key, rs := range got {
		checkKeyOrder(t, key, rs, perKey)
	}
	for id := range planned {
		ok := false
		for _, r := range rc.receipts(id) {
			ok = ok || r.status < 300
		}
		if !ok {
			t.Errorf("delivery %s was never accepted", id)
		}
	}
	if p := rc.rejected(); len(p) > 0 {
		t.Errorf("requests that failed verification: %v", p)
	}
	d := c.waitDelivery(t, deliveryOf(t, c, "ev_kfail_3"), "succeeded", hasStatus("succeeded"))
	if d.GetOrderingKey() != failKey || d.GetSequence() != 3 {
		t.Errorf("history of ev_kfail_3: ordering key %q, sequence %d; want %q, 3", d.GetOrderingKey(), d.GetSequence(), failKey)
	}
}

// deliveryOf returns the id of the delivery of eventID to the tenant's
// endpoint ep_ordered.
func deliveryOf(t *testing.T, c *tenantClient, eventID string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	return events.DeliveryID(c.id, eventID, c.ids["ep_ordered"])
}

// TestOrderingParksKey: on an endpoint whose key_failure is "park", a
// key's delivery that ends failed holds the key's next one until a replay
// of it succeeds; another key goes on meanwhile.
func TestOrderingParksKey(t *testing.T) {
	rc := newHookReceiver(t, nil)
	n := startE2E(t, node.Config{})
	c := n.tenant(t, "acme", nil)
	var refuse atomic.Bool
	refuse.Store(true)
	c.endpoint(t, rc, "ep_park", []string{"order.updated"}, func(s *controlv1.EndpointSettings) {
		s.Ordering, s.KeyFailure, s.MaxAttempts = "key", "park", 1
	}, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("webhook-event-id") == "ev_k_1" && refuse.Load() {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	first := c.publishKeyed(t, "ev_k_1", "order.updated", "k")
	second := c.publishKeyed(t, "ev_k_2", "order.updated", "k")
	if len(first) != 1 || len(second) != 1 {
		t.Fatalf("planned %v and %v, want one delivery each", first, second)
	}
	c.waitDelivery(t, first[0], "failed", hasStatus("failed"))
	other := c.publishKeyed(t, "ev_o_1", "order.updated", "o")
	c.waitDelivery(t, other[0], "succeeded", hasStatus("succeeded"))
	if d := c.waitDelivery(t, second[0], "pending", hasStatus("pending")); d.GetAttemptCount() != 0 {
		t.Errorf("the parked key's next delivery had %d attempts, want 0", d.GetAttemptCount())
	}
	res, err := c.endpoints.ListOrderingKeys(c.ctx(), &controlv1.ListOrderingKeysRequest{EndpointId: c.ids["ep_park"]})
	if err != nil || len(res.GetKeys()) != 1 || res.GetKeys()[0].GetState() != "parked" || res.GetKeys()[0].GetHeadDeliveryId() != first[0] {
		t.Errorf("blocked keys: %v, %v; want k parked on %s", res.GetKeys(), err, first[0])
	}
	refuse.Store(false)
	if _, err := c.deliveries.ReplayDelivery(c.ctx(), &controlv1.ReplayDeliveryRequest{DeliveryId: first[0]}); err != nil {
		t.Fatalf("replay the parked head: %v", err)
	}
	c.waitDelivery(t, second[0], "succeeded", hasStatus("succeeded"))
	rs := rc.receipts(second[0])
	if len(rs) == 0 || rs[0].orderingKey != "k" || rs[0].sequence != 2 {
		t.Errorf("the key's next delivery carried %+v, want ordering key k and sequence 2", rs)
	}
}

// TestOrderingSkipKey: a key whose head keeps failing is listed as
// blocked with what waits behind it; skipping its head (naming it, so a
// key that moved on is not skipped twice) ends the head failed and lets
// the key's next delivery go.
func TestOrderingSkipKey(t *testing.T) {
	rc := newHookReceiver(t, nil)
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)
	c.endpoint(t, rc, "ep_ordered", []string{"order.updated"}, func(s *controlv1.EndpointSettings) {
		s.Ordering, s.MaxAttempts = "key", 100
	}, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.Header.Get("webhook-event-id") == "ev_s_1" {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	epID := c.ids["ep_ordered"]
	head := c.publishKeyed(t, "ev_s_1", "order.updated", "s")
	next := c.publishKeyed(t, "ev_s_2", "order.updated", "s")
	c.waitDelivery(t, head[0], "attempted", hasAttempts(2))

	var keys []*controlv1.OrderingKey
	eventually(t, 10*time.Second, "the key listed as blocked", func() bool {
		res, err := c.endpoints.ListOrderingKeys(c.ctx(), &controlv1.ListOrderingKeysRequest{EndpointId: epID})
		if err != nil {
			t.Fatalf("list ordering keys: %v", err)
		}
		keys = res.GetKeys()
		return len(keys) == 1
	})
	if k := keys[0]; k.GetOrderingKey() != "s" || k.GetHeadDeliveryId() != head[0] || k.GetState() != "blocked" || k.GetWaiting() != 1 || k.GetBlockedSince() == nil {
		t.Errorf("blocked key = %v, want s blocked on %s with 1 waiting", k, head[0])
	}
	health, err := controlv1.NewEndpointHealthServiceClient(n.cc).GetEndpointHealth(c.ctx(), &controlv1.GetEndpointHealthRequest{EndpointId: epID})
	if err != nil || health.GetBlockedKeys() != 1 {
		t.Errorf("endpoint health: %d blocked keys, %v; want 1", health.GetBlockedKeys(), err)
	}
	_, err = c.endpoints.SkipOrderingKey(c.ctx(), &controlv1.SkipOrderingKeyRequest{EndpointId: epID, OrderingKey: "s", HeadDeliveryId: next[0]})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "head_delivery_id") {
		t.Errorf("skip naming another head: %v, want FAILED_PRECONDITION naming head_delivery_id", err)
	}
	_, err = c.endpoints.SkipOrderingKey(c.ctx(), &controlv1.SkipOrderingKeyRequest{EndpointId: epID, OrderingKey: "none"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("skip of a key with nothing waiting: %v, want NOT_FOUND", err)
	}
	eventually(t, 10*time.Second, "the skip of the key's head", func() bool {
		k, err := c.endpoints.SkipOrderingKey(c.ctx(), &controlv1.SkipOrderingKeyRequest{EndpointId: epID, OrderingKey: "s", HeadDeliveryId: head[0]})
		if status.Code(err) == codes.Unavailable {
			return false // an attempt of the head was under way
		}
		if err != nil || k.GetState() != "skipped" {
			t.Fatalf("skip: %v, %v", k, err)
		}
		return true
	})
	c.waitDelivery(t, next[0], "succeeded", hasStatus("succeeded"))
	d := c.waitDelivery(t, head[0], "failed", hasStatus("failed"))
	if d.GetSequence() != 1 {
		t.Errorf("the skipped head's sequence = %d, want 1", d.GetSequence())
	}
	if rs := rc.receipts(next[0]); len(rs) == 0 || rs[0].sequence != 2 {
		t.Errorf("the key's next delivery carried %+v, want sequence 2", rs)
	}
	res, err := c.endpoints.ListOrderingKeys(c.ctx(), &controlv1.ListOrderingKeysRequest{EndpointId: epID, State: "all"})
	if err != nil || len(res.GetKeys()) != 0 {
		t.Errorf("keys after the skip: %v, %v; want none", res.GetKeys(), err)
	}
}
