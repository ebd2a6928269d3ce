package endpoint_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/hookline/hookline/events"
)

// TestLoopStopsWhereItsPartitionIsNotLive: an endpoint grain activated on
// a node that does not hold its partition (a member whose view of the
// partition table lagged asked for it) stops within the I/O timeout
// instead of waiting for the partition for ever, answering commands for
// an endpoint whose deliveries another grain attempts.
func TestLoopStopsWhereItsPartitionIsNotLive(t *testing.T) {
	b := newBench(t)
	b.runner.Own(events.PartitionSet{}) // this node holds no partition
	b.cfg.IOTimeout = 300 * time.Millisecond
	pid := b.endpoint("acme", "ep_1", "http://127.0.0.1:9/in", nil) // commands are answered meanwhile
	waitUntil(t, "the grain stops", func() bool {
		_, alive := b.sys.ProcessRegistry.GetLocal(pid.Id)
		return !alive
	})
}

// TestLoopCatchesUpToItsPosition: a grain that starts where its
// partition has just been handed over waits for the projections to reach
// the position Config.CatchUpTo gives (past its predecessors' records),
// not the log's head: under load the projections trail the head, and the
// wait for it was part of every move's pause. Here they hold short of the
// head, with the endpoint's delivery applied: the new grain attempts it.
// Before, it waited for the head, and so for as long as they held.
func TestLoopCatchesUpToItsPosition(t *testing.T) {
	var fl *faultLog
	b := newBenchWith(t, func(l events.Log) events.Log { fl = newFaultLog(l); return fl })
	b.cfg.IOTimeout = time.Minute
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	first := b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	waitUntil(t, "the first delivery", func() bool { return rc.count(b.publish("acme", "evt_1", "ep_1")[0]) == 1 })
	b.sys.Root.StopFuture(first).Wait() // the partition leaves this node

	d := b.publish("acme", "evt_2", "ep_1")[0] // while no grain runs
	applied, err := b.log.Head(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.runner.WaitFor(t.Context(), applied); err != nil {
		t.Fatal(err)
	}
	fl.holdSubscription(&applied)
	defer fl.holdSubscription(nil)
	b.publish("acme", "evt_3", "ep_2") // the head moves on; the projections do not

	asked := make(chan events.Partition, 1)
	b.cfg.CatchUpTo = func(_ context.Context, p events.Partition) (events.Position, error) {
		asked <- p
		return applied, nil
	}
	b.spawn("ep_1") // the partition comes back
	waitUntil(t, "the delivery planned before the move, while the projections trail the head", func() bool { return rc.count(d) == 1 })
	select {
	case p := <-asked:
		if p != events.PartitionOf("ep_1") {
			t.Fatalf("CatchUpTo asked for partition %d, want ep_1's %d", p, events.PartitionOf("ep_1"))
		}
	default:
		t.Fatal("the grain did not ask CatchUpTo")
	}
}
