package node

import (
	"sync"
	"time"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/projections/due"
)

// pullsKept is how long a pull is remembered.
const pullsKept = 24 * time.Hour

// pulls records when each endpoint's grain last pulled its due work, for
// reconcile's check of due work that no grain pulls. It wraps the puller
// the grains use; it is safe for concurrent use.
type pulls struct {
	p   endpoint.Due
	now func() time.Time

	mu   sync.Mutex // guards last
	last map[string]time.Time
}

func newPulls(p endpoint.Due, now func() time.Time) *pulls {
	return &pulls{p: p, now: now, last: map[string]time.Time{}}
}

// Pull implements endpoint.Due.
func (p *pulls) Pull(endpointID string, now time.Time, limit int) ([]due.Item, error) {
	p.mu.Lock()
	p.last[endpointID] = p.now()
	p.mu.Unlock()
	return p.p.Pull(endpointID, now, limit)
}

// LastPull implements reconcile.Pulls.
func (p *pulls) LastPull(endpointID string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.last[endpointID]
}
