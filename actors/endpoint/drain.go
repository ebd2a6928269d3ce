package endpoint

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/events"
)

// Drain stops new attempts without cutting running ones short, for the
// whole node (a graceful stop) or for some of its partitions (a partition
// handed to another member): a draining endpoint grain starts no attempt
// (its deliveries stay due, for the next owner), while the attempts already
// running finish and their outcomes are recorded. A pull lease counts as an
// attempt, except that nothing waits for it: a draining endpoint hands out
// none, and one already out ends on its own (its consumer's acknowledgement
// goes to the next owner). Running lists the attempts and leases left, which
// a hand-over passes on to the next owner. The zero value is ready to use
// and drains nothing; it is safe for concurrent use, and a nil *Drain never
// drains.
type Drain struct {
	mu     sync.Mutex // guards the fields below
	all    bool
	parts  events.PartitionSet
	busy   [events.Partitions + 1]map[string]Running // by delivery id
	leases [events.Partitions + 1]map[string]Running // by delivery id
	total  int                                       // of busy
}

// Running is an attempt (or a pull lease) a grain started and whose
// outcome it has not recorded yet.
type Running struct {
	EndpointID, DeliveryID string
	// Attempt is the attempt's number: once its outcome is recorded, the
	// delivery's due item counts at least this many attempts, or is gone.
	Attempt int32
	// Until is when the attempt has run out of time, the append of its
	// outcome included.
	Until time.Time
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
// Once it returns, Running lists every attempt of s that may still run:
// none starts after it.
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

// Begin counts the attempt r that a grain is about to start, unless its
// endpoint is draining: then it reports false and the attempt must not
// start. Each Begin that reports true is matched by one End.
func (d *Drain) Begin(r Running) bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining(r.EndpointID) {
		return false
	}
	p := events.PartitionOf(r.EndpointID)
	if d.busy[p] == nil {
		d.busy[p] = map[string]Running{}
	}
	if _, ok := d.busy[p][r.DeliveryID]; !ok {
		d.total++
	}
	d.busy[p][r.DeliveryID] = r
	return true
}

// Lease counts the pull lease r (Until: when the lease and the append of
// its outcome have run out) that a grain is about to hand out, unless its
// endpoint is draining: then it reports false and the lease must not be
// handed out, for the next owner would hand it out too. Running lists it;
// Busy and Total do not count it. Each Lease that reports true is matched
// by one End.
func (d *Drain) Lease(r Running) bool {
	if d == nil {
		return true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining(r.EndpointID) {
		return false
	}
	p := events.PartitionOf(r.EndpointID)
	if d.leases[p] == nil {
		d.leases[p] = map[string]Running{}
	}
	d.leases[p][r.DeliveryID] = r
	return true
}

// End counts out the attempt or lease of deliveryID that Begin or Lease
// counted: its outcome is recorded, or it was let go.
func (d *Drain) End(endpointID, deliveryID string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := events.PartitionOf(endpointID)
	if _, ok := d.busy[p][deliveryID]; ok {
		delete(d.busy[p], deliveryID)
		d.total--
	}
	delete(d.leases[p], deliveryID)
}

// Busy returns the attempts of partition p's endpoints that are running or
// whose outcome is not recorded yet.
func (d *Drain) Busy(p events.Partition) int {
	if d == nil || !p.Valid() {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.busy[p])
}

// Total returns the attempts of every partition that are running or whose
// outcome is not recorded yet.
func (d *Drain) Total() int {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// Running returns the attempts of partition p's endpoints that are running
// or whose outcome is not recorded yet, and its pull leases out, by
// endpoint and delivery.
func (d *Drain) Running(p events.Partition) []Running {
	if d == nil || !p.Valid() {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	all := maps.Clone(d.busy[p])
	if all == nil {
		all = map[string]Running{}
	}
	maps.Copy(all, d.leases[p])
	return slices.SortedFunc(maps.Values(all), func(a, b Running) int {
		if c := strings.Compare(a.EndpointID, b.EndpointID); c != 0 {
			return c
		}
		return strings.Compare(a.DeliveryID, b.DeliveryID)
	})
}
