package due_test

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// TestOrderedDeadlineCountsFromTurn: a delivery that waited behind its
// key's head longer than its 24 hours gets them from its turn, under
// "continue" (the head retried for 30 hours, then succeeded) and under
// "park" (the key parked, then released by a replay 40 hours later), in
// the index and in a rebuild of it. Before, it became due already
// expired: it ended with no attempt, and under "park" the key parked on
// it again.
func TestOrderedDeadlineCountsFromTurn(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	d, r := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	cont, park := hooklinev1.KeyOrdering_KEY_ORDERING_CONTINUE, hooklinev1.KeyOrdering_KEY_ORDERING_PARK

	f.publishKey("c1", "kc", cont, t0)
	f.publishKey("c2", "kc", cont, t0.Add(time.Second))
	f.publishKey("p1", "kp", park, t0)
	f.publishKey("p2", "kp", park, t0.Add(time.Second))
	f.failed("d-c1-A", 1, t0.Add(30*time.Hour))
	f.failed("d-p1-A", 1, time.Time{}) // parks kp
	f.sync(r)

	turn := t0.Add(30 * time.Hour)
	head := attempt("d-c1-A", 2)
	head.FinishedAt = timestamppb.New(turn)
	f.outcome("d-c1-A", &hooklinev1.AttemptSucceeded{Attempt: head})
	release := t0.Add(40 * time.Hour)
	replayed := attempt("d-p1-A", 2)
	replayed.Manual, replayed.OrderingKey, replayed.FinishedAt = true, "kp", timestamppb.New(release)
	f.outcome("d-p1-A", &hooklinev1.ReplayRequested{TenantId: "acme", EndpointId: "A", DeliveryId: "d-p1-A", EventId: "p1", At: timestamppb.New(release)})
	f.outcome("d-p1-A", &hooklinev1.AttemptSucceeded{Attempt: replayed})
	f.sync(r)

	want := map[string]time.Time{
		"d-c2-A": turn.Add(24 * time.Hour),
		"d-p2-A": release.Add(24 * time.Hour),
	}
	d2, _ := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	for i, dd := range []*due.Due{d, d2} {
		items, err := dd.Pull("A", release, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != len(want) {
			t.Fatalf("index %d: due %v, want %d deliveries", i, seqs(items), len(want))
		}
		for _, it := range items {
			if w, ok := want[it.DeliveryID]; !ok || !it.ExpiresAt.Equal(w) {
				t.Errorf("index %d: %s expires at %v, want %v (24 hours from its turn)", i, it.DeliveryID, it.ExpiresAt, w)
			}
		}
	}
}
