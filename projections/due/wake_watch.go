package due

import (
	"sync"
	"sync/atomic"
	"time"
)

// Watch asks for a wake of the delivery's endpoint once the projections
// apply an outcome of deliveryID (an attempt's, or its expiry), until
// until. Watching many more deliveries than a hand-over lists drops the
// watches whose time has passed.
func (d *Due) Watch(deliveryID string, until time.Time) { d.watches.watch(deliveryID, until) }

// Unwatch forgets a watch of deliveryID.
func (d *Due) Unwatch(deliveryID string) { d.watches.unwatch(deliveryID) }

// watches are the deliveries whose outcome an endpoint grain waits for:
// those a member that handed their partition over was still attempting.
// The batch that applies such an outcome wakes the delivery's endpoint,
// whatever else it has due (changes.watch). Safe for concurrent use.
type watches struct {
	now func() time.Time

	mu   sync.Mutex           // guards byID
	byID map[string]time.Time // delivery id → until when to watch it
	n    atomic.Int64         // len(byID), for take to skip mu while none is watched
}

// maxWatches bounds the deliveries watched at once: a hand-over lists the
// attempts running at that moment, a few per partition.
const maxWatches = 65536

func (w *watches) watch(deliveryID string, until time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.byID == nil {
		w.byID = map[string]time.Time{}
	}
	if len(w.byID) >= maxWatches {
		now := w.now()
		for id, u := range w.byID {
			if now.After(u) {
				delete(w.byID, id)
			}
		}
	}
	if len(w.byID) < maxWatches {
		w.byID[deliveryID] = until
	}
	w.n.Store(int64(len(w.byID)))
}

func (w *watches) unwatch(deliveryID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byID, deliveryID)
	w.n.Store(int64(len(w.byID)))
}

// take reports whether deliveryID is watched, and forgets its watch: an
// outcome of it is being applied.
func (w *watches) take(deliveryID string) bool {
	if w.n.Load() == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.byID[deliveryID]
	if ok {
		delete(w.byID, deliveryID)
		w.n.Store(int64(len(w.byID)))
	}
	return ok
}
