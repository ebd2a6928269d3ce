package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/owners"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestLeftMemberKeepsItsStandbyPlace: for standbyDelay after a member left,
// no other member becomes a standby in its place (a rolling restart must
// not make the others catch partitions up from the start of the log);
// after it, the survivors follow every partition again.
func TestLeftMemberKeepsItsStandbyPlace(t *testing.T) {
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	m := &partitions{now: func() time.Time { return now }, seen: map[string]time.Time{}, standbys: 1}
	all := []string{"a:1", "b:1", "c:1"}
	alive := func(ms ...string) map[string]bool {
		out := map[string]bool{}
		for _, a := range ms {
			out[a] = true
		}
		return out
	}
	follows := func(r *cluster.Ranking, self string) int {
		n := 0
		for p := events.Partition(1); p <= events.Partitions; p++ {
			if r.Target(p) == self || slices.Contains(r.Standbys(p, m.standbys), self) {
				n++
			}
		}
		return n
	}
	before := follows(m.standbysBy(alive(all...)), "a:1")
	if before == 0 || before == events.Partitions {
		t.Fatalf("a follows %d partitions of three members' %d; want about two thirds", before, events.Partitions)
	}

	now = now.Add(time.Second) // c stops
	r := m.standbysBy(alive("a:1", "b:1"))
	if got := r.Order(1); len(got) != 3 {
		t.Fatalf("the standby ranking a second after c left ranks %v; want c still in it", got)
	}
	now = now.Add(standbyDelay - 2*time.Second)
	if got := len(m.standbysBy(alive("a:1", "b:1")).Order(1)); got != 3 {
		t.Fatalf("c left %v ago and the standby ranking has %d members; want 3 until %v", standbyDelay-time.Second, got, standbyDelay)
	}

	now = now.Add(5 * time.Second) // c stayed away
	r = m.standbysBy(alive("a:1", "b:1"))
	if got := follows(r, "a:1"); got != events.Partitions {
		t.Fatalf("a follows %d partitions once c is gone for good; want all %d (owner or standby of each)", got, events.Partitions)
	}

	now = now.Add(time.Second) // c comes back
	if got := follows(m.standbysBy(alive(all...)), "a:1"); got != before {
		t.Fatalf("a follows %d partitions with c back; want %d as before", got, before)
	}
}

// TestHandedOverPartitionStaysDrained: a partition being handed over is
// drained, and stays drained once the table has the hand-over: its grains
// here stop only when the placement sees the change, and one with
// deliveries already pulled must not start them, which the new owner
// attempts too. A partition the node serves is not drained; one it never
// served is.
func TestHandedOverPartitionStaysDrained(t *testing.T) {
	in := func(p events.Partition) string { // an endpoint id of partition p
		for i := 0; ; i++ {
			if id := fmt.Sprintf("ep_%d", i); events.PartitionOf(id) == p {
				return id
			}
		}
	}
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	d := &endpoint.Drain{}
	m := &partitions{now: func() time.Time { return now }, drain: d}
	handed, kept, other := in(5), in(6), in(7)

	m.drainFor(map[string][]events.Partition{"b:1": {5}}, events.NewPartitionSet(5, 6))
	if !d.Draining(handed) || d.Draining(kept) || !d.Draining(other) {
		t.Fatalf("while handing 5 over: draining 5 %v, 6 %v, 7 %v; want true, false, true", d.Draining(handed), d.Draining(kept), d.Draining(other))
	}
	m.drainFor(nil, events.NewPartitionSet(6)) // the table has the hand-over
	if !d.Draining(handed) || d.Begin(handed) {
		t.Fatal("a partition handed over is no longer drained: a grain not stopped yet could start an attempt the new owner makes too")
	}
	if !d.Begin(kept) {
		t.Fatal("a served partition is drained")
	}
	d.End(kept)
}

// TestTookOver: a grain starts under a provisional lease only on a
// partition its node took from another member, by a hand-over or a
// failover, within provisionalFor; not on one it started, one it holds
// since long, or one another member owns.
func TestTookOver(t *testing.T) {
	now := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	lately, long := now.Add(-2*time.Second), now.Add(-provisionalFor-time.Second)
	for _, tc := range []struct {
		name string
		o    owners.Owner
		want bool
	}{
		{"handed over lately", owners.Owner{Address: "a:1", Previous: "b:1", Reason: hooklinev1.PartitionsAssigned_REASON_HANDOVER, At: lately}, true},
		{"taken over lately", owners.Owner{Address: "a:1", Previous: "b:1", Reason: hooklinev1.PartitionsAssigned_REASON_FAILOVER, At: lately}, true},
		{"handed over long ago", owners.Owner{Address: "a:1", Previous: "b:1", Reason: hooklinev1.PartitionsAssigned_REASON_HANDOVER, At: long}, false},
		{"started here", owners.Owner{Address: "a:1", Reason: hooklinev1.PartitionsAssigned_REASON_START, At: lately}, false},
		{"handed to another", owners.Owner{Address: "c:1", Previous: "b:1", Reason: hooklinev1.PartitionsAssigned_REASON_HANDOVER, At: lately}, false},
		{"from itself", owners.Owner{Address: "a:1", Previous: "a:1", Reason: hooklinev1.PartitionsAssigned_REASON_FAILOVER, At: lately}, false},
	} {
		if got := tookOver(tc.o, "a:1", now); got != tc.want {
			t.Errorf("%s: tookOver %v, want %v", tc.name, got, tc.want)
		}
	}
}

