package due

import (
	"time"

	"github.com/hookline/hookline/projections"
)

// watches are the deliveries whose outcome an endpoint grain waits for:
// those a member that handed their partition over was still attempting.
// The batch that applies such an outcome wakes the delivery's endpoint,
// whatever else it has due. Watch and Unwatch are safe for concurrent use
// with the runner; wakeFor is the runner goroutine's alone.
type watches struct {
	byID    map[string]time.Time // delivery id → until when to watch it
	wakeFor map[string]struct{}  // endpoints the current batch applied a watched outcome of
}

// maxWatches bounds the deliveries watched at once: a hand-over lists the
// attempts running at that moment, a few per partition.
const maxWatches = 65536

// Watch asks for a wake of the delivery's endpoint once the projections
// apply an outcome of deliveryID (an attempt's, or its expiry), until
// until. Watching many more deliveries than a hand-over lists drops the
// watches whose time has passed.
func (d *Due) Watch(deliveryID string, until time.Time) {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	if d.watch.byID == nil {
		d.watch.byID = map[string]time.Time{}
	}
	if len(d.watch.byID) >= maxWatches {
		now := d.now()
		for id, u := range d.watch.byID {
			if now.After(u) {
				delete(d.watch.byID, id)
			}
		}
	}
	if len(d.watch.byID) < maxWatches {
		d.watch.byID[deliveryID] = until
	}
	d.watching.Store(int64(len(d.watch.byID)))
}

// Unwatch forgets a watch of deliveryID.
func (d *Due) Unwatch(deliveryID string) {
	d.watchMu.Lock()
	defer d.watchMu.Unlock()
	delete(d.watch.byID, deliveryID)
	d.watching.Store(int64(len(d.watch.byID)))
}

// outcome notes, in the batch b, an outcome of deliveryID at endpointID:
// a watched one wakes the endpoint once the batch commits.
func (d *Due) outcome(b *projections.Batch, endpointID, deliveryID string) {
	if d.watching.Load() == 0 {
		return
	}
	d.watchMu.Lock()
	_, ok := d.watch.byID[deliveryID]
	if ok {
		delete(d.watch.byID, deliveryID)
		d.watching.Store(int64(len(d.watch.byID)))
	}
	d.watchMu.Unlock()
	if !ok || endpointID == "" {
		return
	}
	if d.watch.wakeFor == nil {
		d.watch.wakeFor = map[string]struct{}{}
	}
	d.watch.wakeFor[endpointID] = struct{}{}
	d.touch(b, endpointID, nil)
}
