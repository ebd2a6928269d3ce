package endpoint_test

import (
	"net/http"
	"testing"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
)

// TestPlannedCachesEventItLeaves: a hand-over of plans that reaches the
// grain once the projections have applied the plan leaves the deliveries
// to the due index, and still caches the event, so that their first
// attempts read nothing from the log. Before, the event was cached only
// with deliveries the grain took: with the late hand-overs of a three-node
// cluster (another member's publish), reading events back from the log cost
// three nodes 5 times the CPU it cost one (a profile).
func TestPlannedCachesEventItLeaves(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	rc := newReceiver(t, status(http.StatusOK))
	pid := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	pub, plan := b.event("acme", "evt_1", "ep_1")
	// At the log's start: the projections are past it, so the grain takes
	// nothing from the hand-over.
	b.sys.Root.Send(pid, &endpoint.Planned{Event: pub, Items: due.PlannedItems(plan), Position: events.Start})
	id := b.append(pub, plan)[0]
	b.waitStatus("acme", history.Succeeded, id)
	if n := rc.count(id); n != 1 {
		t.Fatalf("%d requests for the delivery", n)
	}
	if n := fl.readsOf(events.EventStream("acme", "evt_1")); n != 0 {
		t.Errorf("the grain read the event's stream %d times; the hand-over had cached the event", n)
	}
}
