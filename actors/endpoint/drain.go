package endpoint

import (
	"sync"
	"sync/atomic"

	"github.com/hookline/hookline/events"
)

// Drain stops new attempts without cutting running ones short, for the
// whole node (a graceful stop) or for some of its partitions (a partition
// handed to another member): a draining endpoint grain starts no attempt
// (its deliveries stay due, for the next owner), while the attempts already
// running finish and their outcomes are recorded. Busy tells when none is
// left. The zero value is ready to use and drains nothing; it is safe for
// concurrent use, and a nil *Drain never drains.
type Drain struct {
	on    atomic.Bool
	parts atomic.Pointer[events.PartitionSet]

	mu   sync.Mutex // guards busy
	busy [events.Partitions + 1]int
}

// Start drains the whole node. It cannot be undone: a node drains once, on
// stop.
func (d *Drain) Start() { d.on.Store(true) }

// Partitions drains the endpoints of the partitions in s, and those only
// (with the whole node's drain, if started): each call replaces the last.
func (d *Drain) Partitions(s events.PartitionSet) { d.parts.Store(&s) }

// Draining reports whether the grain of endpointID may start no attempt.
func (d *Drain) Draining(endpointID string) bool {
	if d == nil {
		return false
	}
	if d.on.Load() {
		return true
	}
	s := d.parts.Load()
	return s != nil && s.Has(events.PartitionOf(endpointID))
}

// Busy returns the attempts of partition p's endpoints that are running or
// whose outcome is not recorded yet.
func (d *Drain) Busy(p events.Partition) int {
	if d == nil || !p.Valid() {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.busy[p]
}

// add counts n attempts of endpointID's partition in or out.
func (d *Drain) add(endpointID string, n int) {
	if d == nil {
		return
	}
	p := events.PartitionOf(endpointID)
	d.mu.Lock()
	d.busy[p] += n
	d.mu.Unlock()
}
