package endpoint

import (
	"sync"
	"time"
)

// Default bounds of a [Quarantine]'s backoff.
const (
	DefaultQuarantineBase = 2 * time.Second
	DefaultQuarantineMax  = 10 * time.Second
)

// Quarantine remembers, for one node, the endpoints whose grain on this
// node lost ownership of a stream (a wrong revision: another activation
// wrote first). A new activation of such an endpoint on this node answers
// commands at once but waits before it attempts deliveries: 2 s after the
// first loss, doubling with each further loss up to ten seconds, and
// forgotten once ten seconds have passed without a loss. The bound is short
// because placement may settle on this node after all (losses also happen
// while members join): the price of a quarantine is latency, never a
// delivery.
//
// Fencing by expected revision keeps the log single-writer whatever
// happens; the quarantine bounds the duplicates that two owners at once
// (a split brain, or a placement race during a membership change) send to
// the receiver: instead of re-activating and racing on every wake, the
// loser stays quiet while the winner delivers.
//
// A Quarantine is safe for concurrent use; its zero value is not, use
// [NewQuarantine]. A nil *Quarantine quarantines nothing.
type Quarantine struct {
	base, max time.Duration
	mu        sync.Mutex // guards lost
	lost      map[string]quarantined
}

type quarantined struct {
	until time.Time
	n     int
}

// NewQuarantine returns a quarantine with backoff from base to max; zero
// values mean [DefaultQuarantineBase] and [DefaultQuarantineMax].
func NewQuarantine(base, most time.Duration) *Quarantine {
	if base <= 0 {
		base = DefaultQuarantineBase
	}
	if most <= 0 {
		most = DefaultQuarantineMax
	}
	return &Quarantine{base: base, max: max(most, base), lost: map[string]quarantined{}}
}

// Lost records that the grain of endpointID on this node lost ownership at
// now.
func (q *Quarantine) Lost(endpointID string, now time.Time) {
	if q == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.prune(now)
	e := q.lost[endpointID]
	if now.Sub(e.until) > q.max {
		e.n = 0 // quiet for long enough: start over
	}
	d := q.base << min(e.n, 16)
	if d > q.max || d <= 0 {
		d = q.max
	}
	e.n++
	e.until = now.Add(d)
	q.lost[endpointID] = e
}

// Until returns when endpointID's grain on this node may attempt again;
// the zero time when it is not quarantined.
func (q *Quarantine) Until(endpointID string, now time.Time) time.Time {
	if q == nil {
		return time.Time{}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	e, ok := q.lost[endpointID]
	if !ok {
		return time.Time{}
	}
	if now.Sub(e.until) > q.max {
		delete(q.lost, endpointID)
		return time.Time{}
	}
	if now.Before(e.until) {
		return e.until
	}
	return time.Time{}
}

// prune forgets the endpoints quiet for longer than the maximum: they are
// not quarantined any more, and their backoff would start over. It runs on
// every loss, so the map holds only endpoints that lost ownership within
// the last two maxima. q.mu must be held.
func (q *Quarantine) prune(now time.Time) {
	for id, e := range q.lost {
		if now.Sub(e.until) > q.max {
			delete(q.lost, id)
		}
	}
}

// Len returns how many endpoints the quarantine remembers.
func (q *Quarantine) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.lost)
}
