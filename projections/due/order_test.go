package due_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// publishKey appends an event with an ordering key, planned for endpoint
// A with the ordering given (as the publish path records it).
func (f *fixture) publishKey(eventID, key string, ordering hooklinev1.KeyOrdering, at time.Time) {
	f.t.Helper()
	planned := &hooklinev1.DeliveriesPlanned{
		TenantId: "acme", EventId: eventID, EventType: "invoice.paid", OrderingKey: key,
		At: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(24 * time.Hour)), Chunks: 1,
		Deliveries: []*hooklinev1.PlannedDelivery{{DeliveryId: "d-" + eventID + "-A", EndpointId: "A", ConfigVersion: 3, Ordering: ordering}},
	}
	f.emit(events.EventStream("acme", eventID), events.NoStream{},
		&hooklinev1.EventPublished{TenantId: "acme", EventId: eventID, EventType: "invoice.paid", Payload: []byte(`{}`), At: timestamppb.New(at), OrderingKey: key},
		planned)
}

// sentAttempt is attempt n of a delivery of key sent with seq (its token
// standing for the key under data key dk_1), started at.
func sentAttempt(deliveryID string, n int32, key string, seq int64, at time.Time) *hooklinev1.Attempt {
	a := attempt(deliveryID, n)
	a.OrderingKey, a.Sequence, a.OrderingToken, a.OrderingTokenKey = key, seq, token(key), "dk_1"
	a.StartedAt = timestamppb.New(at)
	return a
}

// token is key's token on endpoint A as a node without a key vault makes
// it (a digest).
func token(key string) []byte {
	tok, _, err := (*seal.Payloads)(nil).Token(context.Background(), "acme", "A", key)
	if err != nil {
		panic(err)
	}
	return tok
}

// lastSent is d's LastSent of key on endpoint A, under dk_1.
func lastSent(t *testing.T, d *due.Due, key string) int64 {
	t.Helper()
	n, err := d.LastSent("acme", "A", key, token(key), "dk_1")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// seqs lists the delivery ids of items with their sequences.
func seqs(items []due.Item) []string {
	var out []string
	for _, it := range items {
		out = append(out, fmt.Sprintf("%s#%d", it.DeliveryID, it.Sequence))
	}
	return out
}

func pullSeqs(t *testing.T, d *due.Due, now time.Time) []string {
	t.Helper()
	items, err := d.Pull("A", now, 0)
	if err != nil {
		t.Fatal(err)
	}
	return seqs(items)
}

// TestOrderedKeyOneAtATime: on an endpoint ordered by key, only the head
// of each key is due; a failing head blocks its key only; its success, or
// its final failure under "continue", makes the key's next one due. The
// key's count follows the sequences its attempts carry, and a pull
// numbers a head never sent one more than the key's last.
func TestOrderedKeyOneAtATime(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	d, r := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour, Tokens: (*seal.Payloads)(nil)})
	cont := hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE

	f.publishKey("e1", "k1", cont, t0)
	f.publishKey("e2", "k1", cont, t0.Add(time.Second))
	f.publishKey("e3", "k1", cont, t0.Add(2*time.Second))
	f.publishKey("e4", "k2", cont, t0.Add(3*time.Second))
	f.publishKey("e5", "", cont, t0.Add(4*time.Second))                                       // no key: unordered
	f.publishKey("e6", "k1", hooklinev1.KeyOrdering_KEY_ORDERING_NONE, t0.Add(5*time.Second)) // unordered endpoint
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e1-A#1", "d-e4-A#1", "d-e5-A#0", "d-e6-A#0"}, pullSeqs(t, d, t0)); diff != "" {
		t.Errorf("due after planning (-want +got):\n%s", diff)
	}
	if n := lastSent(t, d, "k1"); n != 0 {
		t.Errorf("k1's last sequence before any attempt = %d, want 0", n)
	}

	// The head fails and waits for a retry: its key is blocked, the
	// others go on; the retry keeps the sequence it was sent with.
	f.outcome("d-e1-A", &hooklinev1.AttemptFailed{Attempt: sentAttempt("d-e1-A", 1, "k1", 1, t0), Retryable: true, NextAttemptAt: timestamppb.New(t0.Add(time.Minute))})
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e4-A#1", "d-e5-A#0", "d-e6-A#0"}, pullSeqs(t, d, t0.Add(time.Second))); diff != "" {
		t.Errorf("due while k1's head waits for its retry (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d-e4-A#1", "d-e5-A#0", "d-e6-A#0", "d-e1-A#1"}, pullSeqs(t, d, t0.Add(time.Minute))); diff != "" {
		t.Errorf("due once k1's retry is (-want +got):\n%s", diff)
	}
	keys, err := d.Keys("A", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].OrderingKey != "k1" || keys[0].Head != "d-e1-A" || keys[0].Waiting != 2 || keys[0].Parked || keys[0].BlockedSince.IsZero() {
		t.Errorf("blocked keys = %+v, want k1 blocked on d-e1-A with 2 waiting", keys)
	}
	if all, _ := d.Keys("A", false, 0); len(all) != 2 {
		t.Errorf("keys with a head = %+v, want k1 and k2", all)
	}
	if st, err := d.BlockedKeys(t0.Add(time.Minute)); err != nil || st.Blocked != 1 {
		t.Errorf("BlockedKeys = %+v, %v; want 1", st, err)
	}

	// Its success lets the next of the key go, numbered after it.
	f.outcome("d-e1-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e1-A", 2, "k1", 1, t0.Add(time.Minute))})
	f.outcome("d-e4-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e4-A", 1, "k2", 1, t0)})
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e2-A#2", "d-e5-A#0", "d-e6-A#0"}, pullSeqs(t, d, t0.Add(time.Minute))); diff != "" {
		t.Errorf("due after k1's head succeeded (-want +got):\n%s", diff)
	}
	if a, b := lastSent(t, d, "k1"), lastSent(t, d, "k2"); a != 1 || b != 1 {
		t.Errorf("last sequences of k1, k2 = %d, %d; want 1, 1", a, b)
	}
	// Under "continue", a head that ends failed lets the next go too.
	f.outcome("d-e2-A", &hooklinev1.AttemptFailed{Attempt: sentAttempt("d-e2-A", 1, "k1", 2, t0.Add(time.Minute))})
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e3-A#3", "d-e5-A#0", "d-e6-A#0"}, pullSeqs(t, d, t0.Add(time.Minute))); diff != "" {
		t.Errorf("due after k1's head failed for good (-want +got):\n%s", diff)
	}
	f.outcome("d-e3-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e3-A", 1, "k1", 3, t0.Add(time.Minute))})
	f.sync(r)
	if keys, _ := d.Keys("A", false, 0); len(keys) != 0 {
		t.Errorf("keys with a head once all ended = %+v, want none", keys)
	}
	// A later event of the key is its head, sent with 4: a replay of an
	// earlier delivery (sent with 2) changes nothing.
	f.outcome("d-e2-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e2-A", 2, "k1", 2, t0.Add(time.Hour))})
	f.publishKey("e7", "k1", cont, t0.Add(time.Hour))
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e5-A#0", "d-e6-A#0", "d-e7-A#4"}, pullSeqs(t, d, t0.Add(time.Hour))); diff != "" {
		t.Errorf("due after a later event of k1 (-want +got):\n%s", diff)
	}
	if n := lastSent(t, d, "k1"); n != 3 {
		t.Errorf("k1's last sequence = %d, want 3", n)
	}
}

// TestOrderedSkipLeavesNoGap: a head skipped before it was ever sent took
// no sequence: the key's next delivery is sent with the one it would have.
func TestOrderedSkipLeavesNoGap(t *testing.T) {
	f := newFixture(t)
	d, r := f.open(vfs.NewMem(), due.Config{Now: (&clock{now: t0}).Now, SweepInterval: time.Hour})
	cont := hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE
	f.publishKey("e1", "k", cont, t0)
	f.publishKey("e2", "k", cont, t0.Add(time.Second))
	f.publishKey("e3", "k", cont, t0.Add(2*time.Second))
	f.outcome("d-e1-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e1-A", 1, "k", 1, t0)})
	f.outcome("d-e2-A", &hooklinev1.OrderingKeySkipped{TenantId: "acme", EndpointId: "A", DeliveryId: "d-e2-A", OrderingKey: "k", At: timestamppb.New(t0.Add(time.Minute))})
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e3-A#0"}, pullSeqs(t, d, t0.Add(time.Minute))); diff != "" {
		t.Errorf("due after the skip (-want +got):\n%s", diff)
	}
	if n := lastSent(t, d, "k"); n != 1 {
		t.Errorf("last sequence after a skipped head that was never sent = %d, want 1 (the next goes with 2)", n)
	}
}

// TestOrderedKeyParks: under "park", a head that ends failed holds its
// key (expired or out of attempts) until a replay of it succeeds; the
// index, rebuilt from the log, holds the same.
func TestOrderedKeyParks(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	d, r := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	park := hooklinev1.KeyOrdering_KEY_ORDERING_PARK

	f.publishKey("e1", "k1", park, t0)
	f.publishKey("e2", "k1", park, t0.Add(time.Second))
	f.publishKey("e3", "k2", park, t0.Add(2*time.Second))
	f.publishKey("e4", "k2", park, t0.Add(3*time.Second))
	f.sync(r)
	f.failed("d-e1-A", 1, time.Time{})
	f.outcome("d-e3-A", &hooklinev1.DeliveryExpired{TenantId: "acme", EndpointId: "A", DeliveryId: "d-e3-A", At: timestamppb.New(t0.Add(time.Hour))})
	f.sync(r)
	if got := pullSeqs(t, d, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("due with both keys parked = %v, want none", got)
	}
	keys, err := d.Keys("A", true, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 || !keys[0].Parked || !keys[1].Parked || keys[0].Head != "d-e1-A" || keys[1].Head != "d-e3-A" {
		t.Errorf("blocked keys = %+v, want k1 and k2 parked on d-e1-A and d-e3-A", keys)
	}

	// A rebuild from the log holds the same.
	d2, r2 := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	if got := pullSeqs(t, d2, t0.Add(time.Hour)); len(got) != 0 {
		t.Errorf("rebuilt: due = %v, want none", got)
	}
	// A manual replay of k1's head that succeeds releases the key (its
	// attempt names the key); a replay of k2's head that fails does not.
	replayed := attempt("d-e1-A", 2)
	replayed.Manual, replayed.OrderingKey, replayed.Sequence = true, "k1", 1
	f.outcome("d-e1-A", &hooklinev1.ReplayRequested{TenantId: "acme", EndpointId: "A", DeliveryId: "d-e1-A", EventId: "e1", At: timestamppb.New(t0.Add(time.Hour))})
	f.outcome("d-e1-A", &hooklinev1.AttemptSucceeded{Attempt: replayed})
	failedReplay := attempt("d-e3-A", 2)
	failedReplay.Manual, failedReplay.OrderingKey, failedReplay.Sequence = true, "k2", 1
	f.outcome("d-e3-A", &hooklinev1.ReplayRequested{TenantId: "acme", EndpointId: "A", DeliveryId: "d-e3-A", EventId: "e3", At: timestamppb.New(t0.Add(time.Hour))})
	f.outcome("d-e3-A", &hooklinev1.AttemptFailed{Attempt: failedReplay})
	f.sync(r)
	f.sync(r2)
	for i, dd := range []*due.Due{d, d2} {
		if diff := cmp.Diff([]string{"d-e2-A#0"}, pullSeqs(t, dd, t0.Add(2*time.Hour))); diff != "" {
			t.Errorf("index %d: due after the replays (-want +got):\n%s", i, diff)
		}
	}
}
