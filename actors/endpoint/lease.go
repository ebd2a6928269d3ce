package endpoint

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// Tenant quota leases.
//
// With Grains set, the grain starts attempts only within a lease from its
// tenant's grain: a number of attempts and of attempts in flight, valid
// until it expires (1 s by default). It asks for a new one when the lease
// has expired or is used up, one request at a time, and waits for it (with
// a timer at the lease's end when it got nothing). The tenant grain splits
// its quota max-min fairly among its endpoints that ask, so a tenant with
// thousands of failing endpoints is held to its quota as a whole. If the
// tenant grain cannot be reached, the grain goes on under a fallback lease
// of its own in-flight limit for five seconds (fail open, logged): the
// dispatcher and the endpoint's own limits still bound it. A lease request
// waits at most half a second: when the tenant grain's member has just
// died, its grain comes back elsewhere only once membership notices (about
// five seconds), and the endpoint must not stall meanwhile.

const (
	// leaseTimeout bounds one lease request.
	leaseTimeout = 500 * time.Millisecond
	// fallbackLease is how long the grain goes on without a lease when the
	// tenant grain cannot be reached.
	fallbackLease = 5 * time.Second
)

// leaseState is the endpoint's current lease.
type leaseState struct {
	attempts int32
	inFlight int32
	expires  time.Time
	asking   bool
}

type leaseReply struct {
	lease *internalv1.QuotaLease
	err   error
}

// leaseAllows reports whether the lease covers one more attempt at now; if
// not, it asks for a new one, and returns when to look again (zero: the
// reply pumps).
func (g *grain) leaseAllows(ctx actor.Context, now time.Time) (bool, time.Time) {
	if g.cfg.Grains == nil {
		return true, time.Time{}
	}
	l := &g.loop.lease
	valid := now.Before(l.expires)
	if valid && l.attempts > 0 && int32(g.loop.asks+g.loop.running) < l.inFlight {
		return true, time.Time{}
	}
	if l.asking {
		return false, time.Time{}
	}
	if valid && l.attempts > 0 {
		return false, time.Time{} // in flight at the lease's limit: an outcome pumps
	}
	if valid && !l.expires.IsZero() && l.attempts <= 0 && l.inFlight <= 0 {
		return false, l.expires // granted nothing: wait for the lease to end
	}
	g.askLease(ctx)
	return false, time.Time{}
}

func (g *grain) useLease() {
	if g.cfg.Grains != nil {
		g.loop.lease.attempts--
	}
}

// askLease asks the tenant grain for a lease, off the mailbox.
func (g *grain) askLease(ctx actor.Context) {
	g.loop.lease.asking = true
	grains, tenantID := g.cfg.Grains, g.state.TenantID
	want := &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Lease{Lease: &internalv1.QuotaLeaseRequest{
		EndpointId: g.id, WantAttempts: int32(len(g.loop.ready) + g.maxInFlight()), WantInFlight: int32(g.maxInFlight()),
	}}}
	g.async(ctx, leaseTimeout, func(c context.Context) any {
		res, err := grains.Request(c, tenant.Kind, tenantID, want)
		if err != nil {
			return &leaseReply{err: err}
		}
		rep, ok := res.(*internalv1.TenantReply)
		switch {
		case !ok:
			return &leaseReply{err: errors.New("unexpected answer from the tenant grain")}
		case rep.GetError() != nil:
			return &leaseReply{err: errors.New(rep.GetError().GetMessage())}
		}
		return &leaseReply{lease: rep.GetLease()}
	})
}

func (g *grain) onLease(ctx actor.Context, m *leaseReply) {
	l := &g.loop.lease
	l.asking = false
	now := g.cfg.Now()
	if m.err != nil {
		g.log.Warn("endpoint grain cannot get a quota lease; going on under a fallback lease", "error", m.err)
		n := int32(g.maxInFlight())
		l.attempts, l.inFlight, l.expires = n*int32(fallbackLease/time.Second), n, now.Add(fallbackLease)
	} else {
		l.attempts, l.inFlight, l.expires = m.lease.GetAttempts(), m.lease.GetInFlight(), m.lease.GetExpiresAt().AsTime()
	}
	g.pump(ctx)
}
