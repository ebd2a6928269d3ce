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
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
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
	if !d.Draining(handed) || d.Begin(endpoint.Running{EndpointID: handed, DeliveryID: "d1"}) {
		t.Fatal("a partition handed over is no longer drained: a grain not stopped yet could start an attempt the new owner makes too")
	}
	if !d.Begin(endpoint.Running{EndpointID: kept, DeliveryID: "d2"}) {
		t.Fatal("a served partition is drained")
	}
	d.End(kept, "d2")
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

// TestLeaveWaitsForReadyTargets: a leaving member hands a partition over
// once its target says it has it live and near the log's head; a target
// that has not (a member restarted a moment ago, still replaying what it
// missed) gets it only after leaveWait, and meanwhile the leaving member
// serves it: a hand-over to a lagging target pauses the partition for
// that target's lag.
func TestLeaveWaitsForReadyTargets(t *testing.T) {
	now := time.Date(2026, 12, 4, 7, 0, 0, 0, time.UTC)
	m := &partitions{now: func() time.Time { return now }, leaving: true, leftAt: now}
	ranking := cluster.NewRanking([]string{"b:1", "c:1"}) // a:1 leaves: not a target
	table := &owners.Table{}
	for p := events.Partition(1); p <= events.Partitions; p++ {
		table.Owners[p] = owners.Owner{Address: "a:1", Reason: hooklinev1.PartitionsAssigned_REASON_START}
	}
	all := events.AllPartitions()
	var toB, toC []events.Partition
	for p := events.Partition(1); p <= events.Partitions; p++ {
		if ranking.Target(p) == "b:1" {
			toB = append(toB, p)
		} else {
			toC = append(toC, p)
		}
	}
	m.onReady(&internalv1.PartitionsReady{Member: "b:1", Partitions: func() (ps []uint32) {
		for _, p := range toB {
			ps = append(ps, uint32(p))
		}
		return ps
	}()})
	decide := func() plan {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.decide("a:1", ranking, ranking, map[string]bool{"a:1": true, "b:1": true, "c:1": true}, table, all)
	}

	now = now.Add(time.Second)
	pl := decide()
	if len(pl.hand["b:1"]) != len(toB) || len(pl.hand["c:1"]) != 0 {
		t.Fatalf("a second into the leave: handing %d partitions to the ready b and %d to c, which has not said it is ready; want %d and 0",
			len(pl.hand["b:1"]), len(pl.hand["c:1"]), len(toB))
	}
	if pl.claim.Len() != events.Partitions {
		t.Fatalf("the leaving member serves %d partitions while it hands them over; want all %d", pl.claim.Len(), events.Partitions)
	}
	now = now.Add(leaveWait)
	if got := len(decide().hand["c:1"]); got != len(toC) {
		t.Fatalf("after leaveWait: handing %d partitions to c; want all %d of them", got, len(toC))
	}
}
