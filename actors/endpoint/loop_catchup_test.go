package endpoint_test

import (
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
