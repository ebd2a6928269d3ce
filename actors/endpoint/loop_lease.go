package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

const (
	// leaseTimeout bounds one lease request. A tenant grain answers in
	// milliseconds; one that does not answer within this is most likely on
	// a member that died, and the endpoint's attempts wait for the answer,
	// so the wait is short and the fallback lease covers the rest.
	leaseTimeout = 250 * time.Millisecond
	// fallbackLease is how long the grain goes on without a lease when the
	// tenant grain cannot be reached.
	fallbackLease = 5 * time.Second
)

// leaseState is the endpoint's current quota lease from its tenant's
// grain: a number of attempts and of attempts in flight, until it expires.
// With Config.Grains set, the loop starts attempts only within it, and
// asks for a new one when it has expired or is used up, one request at a
// time. When the tenant grain cannot be reached, it goes on under a
// fallback lease of its own in-flight limit for fallbackLease (fail open,
// logged).
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
func (l *loop) leaseAllows(ctx actor.Context, now time.Time) (bool, time.Time) {
	if l.cfg.Grains == nil {
		return true, time.Time{}
	}
	ls := &l.lease
	valid := now.Before(ls.expires)
	if valid && ls.attempts > 0 && int32(l.asks+l.running) < ls.inFlight {
		return true, time.Time{}
	}
	if ls.asking {
		return false, time.Time{}
	}
	if valid && ls.attempts > 0 {
		return false, time.Time{} // in flight at the lease's limit: an outcome pumps
	}
	if valid && !ls.expires.IsZero() && ls.attempts <= 0 && ls.inFlight <= 0 {
		return false, ls.expires // granted nothing: wait for the lease to end
	}
	l.askLease(ctx)
	return false, time.Time{}
}

// useLease counts an attempt against the lease.
func (l *loop) useLease() {
	if l.cfg.Grains != nil {
		l.lease.attempts--
	}
}

// askLease asks the tenant grain for a lease, off the mailbox.
func (l *loop) askLease(ctx actor.Context) {
	l.lease.asking = true
	grains, tenantID := l.cfg.Grains, l.state.TenantID
	want := &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Lease{Lease: &internalv1.QuotaLeaseRequest{
		EndpointId: l.id, WantAttempts: int32(len(l.ready) + l.maxInFlight()), WantInFlight: int32(l.maxInFlight()),
	}}}
	l.async(ctx, leaseTimeout, func(c context.Context) any {
		res, err := grains.Request(c, tenant.Kind, tenantID, want)
		if err != nil {
			return &leaseReply{err: err}
		}
		rep, ok := res.(*internalv1.TenantReply)
		switch {
		case !ok:
			return &leaseReply{err: fmt.Errorf("the tenant grain answered %T, not a TenantReply", res)}
		case rep.GetError() != nil:
			return &leaseReply{err: fmt.Errorf("the tenant grain refused the lease: %s", rep.GetError().GetMessage())}
		}
		return &leaseReply{lease: rep.GetLease()}
	})
}

// onLease takes the tenant grain's lease, or a fallback lease when it
// could not be reached.
func (l *loop) onLease(ctx actor.Context, m *leaseReply) {
	ls := &l.lease
	ls.asking = false
	now := l.cfg.Now()
	if m.err != nil {
		l.log.Warn("endpoint grain cannot get a quota lease; going on under a fallback lease", "error", m.err)
		n := int32(l.maxInFlight())
		ls.attempts, ls.inFlight, ls.expires = n*int32(fallbackLease/time.Second), n, now.Add(fallbackLease)
	} else {
		ls.attempts, ls.inFlight, ls.expires = m.lease.GetAttempts(), m.lease.GetInFlight(), m.lease.GetExpiresAt().AsTime()
	}
	l.pump(ctx)
}
