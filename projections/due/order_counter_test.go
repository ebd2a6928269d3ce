package due_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// emitIn appends msg to stream in the partition of endpoint A, as the
// endpoint grain appends to its ordering stream.
func (f *fixture) emitIn(stream string, msg proto.Message) {
	f.t.Helper()
	f.n++
	ev, err := events.EncodeIn(msg, fmt.Sprintf("test %d", f.n), stream, events.PartitionOf("A"))
	if err != nil {
		f.t.Fatal(err)
	}
	res, err := f.log.Append(context.Background(), stream, events.Any{}, ev)
	if err != nil {
		f.t.Fatal(err)
	}
	f.head = res.Position
}

// checkpoint appends what d says endpoint A's next checkpoint holds, as
// its grain does, and returns it.
func (f *fixture) checkpoint(d *due.Due, at time.Time) due.Checkpoint {
	f.t.Helper()
	cp, err := d.Unchecked("A", 0)
	if err != nil {
		f.t.Fatal(err)
	}
	m := &hooklinev1.OrderingCheckpointed{TenantId: "acme", EndpointId: "A", Floor: cp.Floor, At: timestamppb.New(at)}
	for _, c := range cp.Counts {
		m.Counts = append(m.Counts, &hooklinev1.OrderingCount{Token: c.Token, TokenKey: c.TokenKey, Sequence: c.Sequence})
	}
	f.emitIn(events.OrderingStream("A"), m)
	return cp
}

// drop drops the event and delivery streams of events from the log, as
// retention does.
func (f *fixture) drop(eventIDs ...string) {
	f.t.Helper()
	var streams []string
	for _, e := range eventIDs {
		streams = append(streams, events.EventStream("acme", e), events.DeliveryStream("d-"+e+"-A"))
	}
	if _, err := f.log.DropStreams(context.Background(), streams); err != nil {
		f.t.Fatal(err)
	}
}

// items reads every item of endpoint A's partition, by delivery.
func items(t *testing.T, d *due.Due) map[string]due.Item {
	t.Helper()
	out := map[string]due.Item{}
	err := d.Each(events.PartitionOf("A"), func(it due.Item) error {
		out[it.DeliveryID] = it
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOrderedCountOutlivesRetention: the last sequence of a key survives
// retention's drop of the attempts that said it: its endpoint's grain is
// woken to checkpoint the count once it has waited CheckpointAfter (and
// tenant retention keeps the deliveries until then), and an index rebuilt
// from what the log still holds (a joining member, a replaced disk, a
// repair) counts the key where the node's did, and holds the same items.
// Before, a rebuild numbered the key from the plans the log still held.
func TestOrderedCountOutlivesRetention(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	rec := newRecorder()
	after := 10 * time.Minute
	d, r := f.open(vfs.NewMem(), due.Config{Waker: rec, Now: clk.Now, SweepInterval: time.Hour, CheckpointAfter: after})
	cont := hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE

	f.publishKey("e1", "k", cont, t0)
	f.publishKey("e2", "k", cont, t0.Add(time.Second))
	f.publishKey("e3", "k", cont, t0.Add(2*time.Second))
	f.outcome("d-e1-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e1-A", 1, "k", 1, t0)})
	sentAt := t0.Add(time.Minute)
	f.outcome("d-e2-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e2-A", 1, "k", 2, sentAt)})
	f.sync(r)

	// The count has been unchecked since the first attempt (at t0).
	if d.CheckpointDue("A", t0.Add(after-time.Second), false) || !d.CheckpointDue("A", t0, true) {
		t.Errorf("checkpoint due before CheckpointAfter, or not due with all")
	}
	if !d.Retains("A", sentAt) || !d.Retains("A", t0) {
		t.Errorf("tenant retention may drop a delivery whose attempt holds the key's unchecked count")
	}
	rec.reset()
	if d.Sweep(t0.Add(after)); rec.count("A") != 1 {
		t.Errorf("sweep once the count waited CheckpointAfter woke A %d times, want once", rec.count("A"))
	}
	cp := f.checkpoint(d, t0.Add(after))
	if diff := cmp.Diff(due.Checkpoint{TenantID: "acme", Counts: []due.Count{{Token: token("k"), TokenKey: "dk_1", Sequence: 2}}}, cp); diff != "" {
		t.Errorf("unchecked (-want +got):\n%s", diff)
	}
	f.sync(r)
	if d.CheckpointDue("A", sentAt.Add(time.Hour), true) || d.Retains("A", sentAt) {
		t.Errorf("checkpoint still due, or deliveries still retained, once the checkpoint is applied")
	}

	// Retention drops the first two events and their deliveries; a
	// rebuild from the log holds the count and the items the node does.
	f.drop("e1", "e2")
	rebuilt, _ := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	for i, dd := range []*due.Due{d, rebuilt} {
		if n := lastSent(t, dd, "k"); n != 2 {
			t.Errorf("index %d: last sequence of k = %d, want 2 (its next goes with 3)", i, n)
		}
		if diff := cmp.Diff([]string{"d-e3-A#0"}, pullSeqs(t, dd, sentAt)); diff != "" {
			t.Errorf("index %d: due (-want +got):\n%s", i, diff)
		}
	}
	if diff := cmp.Diff(items(t, d), items(t, rebuilt)); diff != "" {
		t.Errorf("items of the node and of the rebuild differ (-node +rebuild):\n%s", diff)
	}
}

// TestOrderedCountsErased: a tenant's erasure forgets its keys' counts and
// legacy counts (keys in clear), whatever partition applies it when: the
// endpoint's floor keeps the highest, so a key goes on above it, never
// back to 1; the floor is checkpointed in turn. An endpoint's deletion
// forgets its counts, and later attempts do not bring them back.
func TestOrderedCountsErased(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	d, r := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	cont := hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE
	f.publishKey("e1", "k", cont, t0)
	f.publishKey("e2", "legacy", cont, t0)
	f.outcome("d-e1-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e1-A", 1, "k", 5, t0)})
	old := attempt("d-e2-A", 1) // recorded before tokens
	old.OrderingKey, old.Sequence = "legacy", 7
	f.outcome("d-e2-A", &hooklinev1.AttemptSucceeded{Attempt: old})
	f.sync(r)
	if n, err := d.LastSent("acme", "A", "legacy", token("legacy"), "dk_1"); err != nil || n != 7 {
		t.Errorf("last sequence of a key counted before tokens = %d, %v; want 7", n, err)
	}

	f.emit(events.TenantStream("acme"), events.Any{}, &hooklinev1.TenantErased{TenantId: "acme", DataKeyId: "dk_1", At: timestamppb.New(t0.Add(time.Hour))})
	// An attempt under the erased key applied after the erasure (a
	// partition caught up late) counts in the floor, not under its token.
	f.outcome("d-e1-A", &hooklinev1.AttemptSucceeded{Attempt: sentAttempt("d-e1-A", 2, "k", 8, t0.Add(time.Hour))})
	f.sync(r)
	for _, c := range []struct {
		key, tokenKey string
	}{{"k", "dk_1"}, {"k", "dk_2"}, {"legacy", "dk_2"}, {"new", "dk_2"}} {
		if n, err := d.LastSent("acme", "A", c.key, []byte("token-after-"+c.key), c.tokenKey); err != nil || n != 8 {
			t.Errorf("after the erasure, last sequence of %s (token under %s) = %d, %v; want the floor, 8", c.key, c.tokenKey, n, err)
		}
	}
	cp, err := d.Unchecked("A", 0)
	if err != nil || cp.Floor != 8 || len(cp.Counts) != 0 {
		t.Errorf("unchecked after the erasure = %+v, %v; want the floor 8 alone", cp, err)
	}
	f.checkpoint(d, t0.Add(2*time.Hour))
	f.sync(r)
	// A repair rebuilds the index: it applies the partitions' records
	// again, not the erasure; the floor comes back from its checkpoint.
	if err := r.Rebuild(due.Name); err != nil {
		t.Fatal(err)
	}
	f.sync(r)
	if n := lastSent(t, d, "new"); n != 8 {
		t.Errorf("after a rebuild, last sequence of a new key = %d, want the floor, 8", n)
	}
	f.drop("e1", "e2")
	rebuilt, _ := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	if n := lastSent(t, rebuilt, "new"); n != 8 {
		t.Errorf("rebuilt after the erasure and retention: last sequence of a new key = %d, want the floor, 8", n)
	}

	f.emit(events.EndpointStream("A"), events.Any{}, &hooklinev1.EndpointDeleted{TenantId: "acme", EndpointId: "A", At: timestamppb.New(t0.Add(3 * time.Hour))})
	f.outcome("d-e3-A", &hooklinev1.AttemptFailed{Attempt: sentAttempt("d-e3-A", 1, "k3", 1, t0.Add(3*time.Hour))})
	f.sync(r)
	if n := lastSent(t, d, "k3"); n != 0 {
		t.Errorf("last sequence on a deleted endpoint = %d, want 0", n)
	}
	if n, err := d.LastSent("acme", "A", "new", []byte("token-after-new"), "dk_2"); err != nil || n != 0 {
		t.Errorf("floor of a deleted endpoint = %d, %v; want 0", n, err)
	}
	if cp, err := d.Unchecked("A", 0); err != nil || !cp.Empty() || d.CheckpointDue("A", t0.Add(time.Hour*100), true) {
		t.Errorf("a deleted endpoint has unchecked counts: %+v, %v", cp, err)
	}
}
