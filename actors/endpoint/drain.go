package endpoint

import (
	"sync"

	"github.com/hookline/hookline/events"
)

// Drain stops new attempts without cutting running ones short, for the
// whole node (a graceful stop) or for some of its partitions (a partition
// handed to another member): a draining endpoint grain starts no attempt
// (its deliveries stay due, for the next owner), while the attempts already
// running finish and their outcomes are recorded. Busy tells how many are
// left. The zero value is ready to use and drains nothing; it is safe for
// concurrent use, and a nil *Drain never drains.
type Drain struct {
	mu    sync.Mutex // guards the fields below
	all   bool
	parts events.PartitionSet
	busy  [events.Partitions + 1]int
}

// Start drains the whole node. It cannot be undone: a node drains once, on
// stop.
func (d *Drain) Start() {
	d.mu.Lock()
	d.all = true
	d.mu.Unlock()
}

// Partitions drains the endpoints of the partitions in s, and those only
// (with the whole node's drain, if started): each call replaces the last.
// Once it returns, Busy counts every attempt of s that may still run: none
// starts after it.
func (d *Drain) Partitions(s events.PartitionSet) {
	d.mu.Lock()
	d.parts = s
	d.mu.Unlock()
}

// Draining reports whether the grain of endpointID may start no attempt.
func (d *Drain) Draining(endpointID string) bool {
	if d == nil {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining(endpointID)
}

func (d *Drain) draining(endpointID string) bool {
	return d.all || d.parts.Has(events.PartitionOf(endpointID))
}

// Begin counts an attempt of endpointID's grain that starts, unless the
// grain is draining: then it reports false and the attempt must not start.
// Each Begin that reports true is matched by one End.
func (d *Drain) Begin(endpointID string) bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining(endpointID) {
		return false
	}
	d.busy[events.PartitionOf(endpointID)]++
	return true
}

// End counts out an attempt counted by Begin: its outcome is recorded, or
// it was let go.
func (d *Drain) End(endpointID string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	d.busy[events.PartitionOf(endpointID)]--
	d.mu.Unlock()
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
