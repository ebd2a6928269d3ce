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
	// DefaultLeaseTimeout bounds one lease request (Config.LeaseTimeout).
	// A tenant grain answers in milliseconds; one that does not answer
	// within this is most likely on a member that died, and the endpoint's
	// attempts wait for the answer, so the wait is short and the fallback
	// lease covers the rest.
	DefaultLeaseTimeout = 250 * time.Millisecond
	// fallbackLease is how long the grain goes on without a lease when the
	// tenant grain cannot be reached.
	fallbackLease = 5 * time.Second
)

// leaseState is the endpoint's current quota lease from its tenant's
// grain: a number of attempts and of attempts in flight, until it expires.
// With Config.Grains set, the loop starts attempts only within it, and
// asks for a new one when it has expired or is used up, one request at a
// time; and for more of the period's share once what is left is no more
// than its in-flight limit and than what it used (early: attempts go on
// under the rest meanwhile), until the tenant grants none. A busy
// endpoint asks ahead, in its lease's last quarter: the tenant grants the
// next period's lease at once (see tenant.Leases), held in next until the
// current one ends or is used up, so attempts go on across the boundary
// without waiting for a round trip to the tenant's grain, which may be on
// another member or moving to one. When the tenant grain cannot be
// reached, it goes on under a fallback lease of its own in-flight limit
// for fallbackLease (fail open, logged); when it was asking ahead, the
// fallback follows the current lease.
//
// A grain started on a partition its node took over lately
// (Config.ProvisionalLease) does not wait for its first lease: it starts
// up to its in-flight limit under a provisional lease until the answer
// comes (at most Config.LeaseTimeout), and what it started then counts against
// that first lease. So does a grain whose lease ends while its renewal,
// asked ahead, is unanswered: a tenant grain on a busy member, or one that
// is moving, answered later than the lease's last quarter, and every busy
// endpoint of its tenant stopped until it did (up to Config.LeaseTimeout),
// at once: a tenant-wide stall in a rolling restart. The endpoint's previous grain, on the member that let
// the partition go, stopped starting attempts before the move was
// recorded; without this, every endpoint of a moved partition waited a
// round trip to its tenant's grain (itself perhaps moving) after the
// move's pause. The tenant's quota may be exceeded by at most one
// in-flight limit's worth of attempts per endpoint and move, when its
// first lease grants fewer than it started, and as much per late renewal.
type leaseState struct {
	l *loop
	leaseBucket
	granted  time.Time    // when the current lease began, as seen here
	next     *leaseBucket // the next period's, granted ahead
	asking   bool
	aheadFor time.Time // the current lease's expiry when it was renewed ahead

	// earlyFor is the current lease's expiry when more of its period's
	// share was asked for before it was used up; dry is set once the
	// tenant granted none, and the grain asks again only for the next
	// period's.
	earlyFor time.Time
	dry      bool

	// provisional is the size of the provisional lease the current one
	// is, until the first answer; zero when it is not one. triedFirst is
	// set once the grain looked whether it may have one.
	provisional int32
	triedFirst  bool
}

// renewing reports whether the request under way was sent for the
// current lease while it was valid (ahead of its period's end, or early,
// before it was used up): if the lease ends before the answer comes, the
// tenant's grain is late, and the grain goes on provisionally.
func (ls *leaseState) renewing() bool {
	return ls.asking && !ls.expires.IsZero() && (ls.aheadFor.Equal(ls.expires) || ls.earlyFor.Equal(ls.expires))
}

// leaseBucket is one period's lease: attempts left of total granted.
type leaseBucket struct {
	attempts int32
	total    int32
	inFlight int32
	expires  time.Time
}

type leaseReply struct {
	lease *internalv1.QuotaLease
	err   error
	ahead bool // asked ahead, while the current lease was valid
}

// allows reports whether the lease covers one more attempt at now; if
// not, it asks for a new one, and returns when to look again (zero: the
// reply pumps).
func (ls *leaseState) allows(ctx actor.Context, now time.Time) (bool, time.Time) {
	l := ls.l
	if l.cfg.Grains == nil {
		return true, time.Time{}
	}
	if ls.next != nil && (!now.Before(ls.expires) || ls.attempts <= 0 && ls.next.attempts > 0) {
		// The current lease ended, or it is used up while the next
		// period's is in hand: go on under the next one. Started early,
		// it is started a quarter of a period early at most (it is asked
		// for in the last quarter), and the next is asked for a quarter
		// before it ends as usual: each period's grant is used once, and
		// the quota holds per period, shifted. Waiting for the current
		// period's end instead held a busy endpoint whose share outgrew
		// its last ask for up to a quarter of a period (a p99 of ~190 ms
		// for a tenant far from its quota).
		ls.granted, ls.leaseBucket, ls.next, ls.dry = ls.expires, *ls.next, nil, false
	}
	valid := now.Before(ls.expires)
	ahead := time.Time{} // when to ask ahead
	if valid && ls.next == nil && !ls.granted.IsZero() && !ls.aheadFor.Equal(ls.expires) {
		ahead = ls.expires.Add(-ls.expires.Sub(ls.granted) / 4)
		if !now.Before(ahead) && !ls.asking {
			ls.aheadFor = ls.expires
			ls.ask(ctx, true)
		}
	}
	if ls.expires.IsZero() && !ls.triedFirst { // never had a lease
		ls.triedFirst = true
		if l.cfg.ProvisionalLease != nil && l.cfg.ProvisionalLease(l.partition()) {
			if !ls.asking {
				ls.ask(ctx, false)
			}
			n := int32(l.maxInFlight())
			ls.leaseBucket = leaseBucket{attempts: n, total: n, inFlight: n, expires: now.Add(l.cfg.LeaseTimeout)}
			ls.provisional, valid = n, true
		}
	}
	if !valid && ls.provisional == 0 && ls.renewing() {
		// The lease ended while its renewal, asked ahead, is unanswered:
		// the tenant's grain is slow (a busy member) or moving. Go on
		// under a provisional lease until the answer comes, as a grain
		// new to its partition does: what it starts counts against the
		// renewal.
		n := int32(l.maxInFlight())
		ls.leaseBucket = leaseBucket{attempts: n, total: n, inFlight: n, expires: now.Add(l.cfg.LeaseTimeout)}
		ls.provisional, valid = n, true
	}
	if valid {
		ls.askEarly(ctx, now)
	}
	if valid && ls.attempts > 0 && int32(l.slots.asks+l.running) < ls.inFlight {
		return true, time.Time{}
	}
	if ls.asking {
		if valid && ls.provisional == 0 && ls.renewing() {
			return false, ls.expires // the renewal may come late: look again when the lease ends
		}
		return false, time.Time{}
	}
	if valid && ls.attempts > 0 {
		return false, time.Time{} // in flight at the lease's limit: an outcome pumps
	}
	if valid && (ls.next != nil || ls.dry || (!ls.expires.IsZero() && ls.inFlight <= 0)) {
		// Used up, with a next period's lease of no attempts in hand; or
		// granted nothing more this period: wait for the period's end, or
		// until it is time to ask ahead.
		if now.Before(ahead) {
			return false, ahead
		}
		return false, ls.expires
	}
	ls.ask(ctx, false)
	return false, time.Time{}
}

// use counts an attempt against the lease.
func (ls *leaseState) use(ctx actor.Context, now time.Time) {
	if ls.l.cfg.Grains != nil {
		ls.attempts--
		ls.askEarly(ctx, now)
	}
}

// askEarly asks for more of the current period's share when what is left
// of the lease is no more than the endpoint's in-flight limit, nor than
// what it used of it: now, while the rest keeps attempts going, rather
// than once it is used up, when the next attempt would wait a round trip
// to the tenant's grain (on another member, on a busy one, or moving). An
// endpoint busier than its last ask ran out within every period and waited
// for that round trip: up to the lease timeout near a restart. One that
// used less than half of its lease holds the rest of the tenant's budget
// for the period already, and does not ask for more. It asks no more once
// the tenant granted none (dry), nor with the next period's lease in hand.
func (ls *leaseState) askEarly(ctx actor.Context, now time.Time) {
	if ls.asking || ls.dry || ls.provisional > 0 || ls.next != nil || ls.attempts <= 0 ||
		ls.attempts > int32(ls.l.maxInFlight()) || ls.total-ls.attempts < ls.attempts || !now.Before(ls.expires) {
		return
	}
	ls.earlyFor = ls.expires
	ls.ask(ctx, false)
}

// prefetch asks for a first lease while the loop catches up, so that a
// grain activated for due work (a partition moved here, a wake) does not
// wait for the answer after its catch-up.
func (ls *leaseState) prefetch(ctx actor.Context) {
	if ls.l.cfg.Grains != nil && !ls.asking && ls.l.state.TenantID != "" {
		ls.ask(ctx, false)
	}
}

// ask asks the tenant grain for a lease, off the mailbox; ahead while the
// current one is valid.
func (ls *leaseState) ask(ctx actor.Context, ahead bool) {
	l := ls.l
	ls.asking = true
	grains, tenantID := l.cfg.Grains, l.state.TenantID
	want := &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Lease{Lease: &internalv1.QuotaLeaseRequest{
		EndpointId: l.id, WantAttempts: int32(len(l.ready) + l.maxInFlight()), WantInFlight: int32(l.maxInFlight()),
	}}}
	l.async(ctx, l.cfg.LeaseTimeout, func(c context.Context) any {
		r := &leaseReply{ahead: ahead}
		res, err := grains.Request(c, tenant.Kind, tenantID, want)
		rep, ok := res.(*internalv1.TenantReply)
		switch {
		case err != nil:
			r.err = err
		case !ok:
			r.err = fmt.Errorf("the tenant grain answered %T, not a TenantReply", res)
		case rep.GetError() != nil:
			r.err = fmt.Errorf("the tenant grain refused the lease: %s", rep.GetError().GetMessage())
		default:
			r.lease = rep.GetLease()
		}
		return r
	})
}

// onReply takes the tenant grain's lease, or a fallback lease when it
// could not be reached: the current one, or the next one when the current
// is still valid and the answer is for the period after it.
func (ls *leaseState) onReply(ctx actor.Context, m *leaseReply) {
	l := ls.l
	ls.asking = false
	now := l.cfg.Now()
	valid := now.Before(ls.expires)
	var b leaseBucket
	if m.err != nil {
		l.log.Warn("endpoint grain cannot get a quota lease; going on under a fallback lease", "error", m.err)
		n := int32(l.maxInFlight())
		b = leaseBucket{attempts: n * int32(fallbackLease/time.Second), inFlight: n, expires: now.Add(fallbackLease)}
		b.total = b.attempts
		if m.ahead && valid {
			b.expires = ls.expires.Add(fallbackLease)
		}
	} else {
		b = leaseBucket{attempts: m.lease.GetAttempts(), total: m.lease.GetAttempts(), inFlight: m.lease.GetInFlight(), expires: m.lease.GetExpiresAt().AsTime()}
	}
	if ls.provisional > 0 {
		// The first answer: the attempts started under the provisional
		// lease are taken from it.
		b.attempts -= ls.provisional - ls.attempts
		ls.provisional = 0
		ls.granted, ls.leaseBucket, ls.next, ls.dry = now, b, nil, false
		l.pump(ctx)
		return
	}
	switch {
	case valid && b.expires.After(ls.expires):
		ls.next = &b // the next period's: it follows the current one
	case valid && b.expires.Equal(ls.expires):
		// More of the current period's share.
		ls.attempts += b.attempts
		ls.total += b.attempts
		ls.dry = b.attempts <= 0
		if b.attempts > 0 || ls.attempts <= 0 {
			ls.inFlight = b.inFlight // none left: 0, wait for the period's end
		}
	default:
		ls.granted, ls.leaseBucket, ls.next, ls.dry = now, b, nil, false
	}
	l.pump(ctx)
}
