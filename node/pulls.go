package node

import (
	"sync"
	"time"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/projections/due"
)

// pullsKept is how long a pull is remembered: longer than any wait for
// a pull reconcile checks (a minute by default), so forgetting a pull
// changes none of its verdicts.
const pullsKept = 24 * time.Hour

// pulls records when each endpoint's grain last pulled its due work, for
// reconcile's check of due work that no grain pulls. It wraps the puller
// the grains use; it is safe for concurrent use. It remembers the
// endpoints that pulled within pullsKept, not every endpoint that ever
// pulled on the node: older entries are swept, at most once an hour, by
// the pulls themselves.
type pulls struct {
	p   endpoint.Due
	now func() time.Time

	mu    sync.Mutex // guards last and swept
	last  map[string]time.Time
	swept time.Time
}

func newPulls(p endpoint.Due, now func() time.Time) *pulls {
	return &pulls{p: p, now: now, last: map[string]time.Time{}, swept: now()}
}

// Pull implements endpoint.Due.
func (p *pulls) Pull(endpointID string, now time.Time, limit int) ([]due.Item, error) {
	at := p.now()
	p.mu.Lock()
	p.last[endpointID] = at
	if at.Sub(p.swept) >= pullsKept/24 {
		for id, t := range p.last {
			if at.Sub(t) > pullsKept {
				delete(p.last, id)
			}
		}
		p.swept = at
	}
	p.mu.Unlock()
	return p.p.Pull(endpointID, now, limit)
}

// LastPull implements reconcile.Pulls: the zero time for an endpoint that
// has not pulled within pullsKept.
func (p *pulls) LastPull(endpointID string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[endpointID]
}
