package endpoint

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/time/rate"

	"github.com/hookline/hookline/projections/due"
)

// lowOnWork reports whether the grain should pull: it holds fewer
// deliveries waiting to start (being read, or ready) than its in-flight
// limit, and has room for more. An endpoint that cannot start what it holds
// (a hanging receiver, an open circuit, no slot) does not scan the due
// index on every wake: it pulls again once its deliveries move. Retries
// waiting for a slot do not count: the dispatcher may hold them back while
// new work on the node is late, and this endpoint's new work must be
// pulled past them.
func (l *loop) lowOnWork() bool {
	waiting := l.reading + len(l.ready)
	for _, f := range l.ready[:min(l.slots.asks, len(l.ready))] {
		if f.class() == due.ClassRetry {
			waiting--
		}
	}
	return len(l.flights) < l.capacity() && waiting < l.maxInFlight()
}

// enqueue puts a flight among the ready ones: new deliveries first, then
// by due time.
func (l *loop) enqueue(f *flight) {
	f.stage = stageReady
	l.holds.ready(f, l.cfg.Now())
	i, _ := slices.BinarySearchFunc(l.ready, f, func(a, b *flight) int {
		if ca, cb := a.class(), b.class(); ca != cb {
			return int(ca) - int(cb)
		}
		if c := a.item.DueAt.Compare(b.item.DueAt); c != 0 {
			return c
		}
		return -1 // after the equal ones: stable
	})
	l.ready = slices.Insert(l.ready, i, f)
}

// endReady ends the ready flights of a deleted endpoint.
func (l *loop) endReady(ctx actor.Context) {
	ready := l.ready
	l.ready = nil
	for _, f := range ready {
		l.settle(ctx, f)
	}
}

// releaseReady lets go of the ready flights of a paused endpoint: they stay
// due in the index, and are pulled (and checked against their deadline)
// again on resume.
func (l *loop) releaseReady() {
	ready := l.ready
	l.ready = nil
	for _, f := range ready {
		l.drop(nil, f)
	}
}

// startReady asks for slots for the ready flights while the limits allow;
// it returns when a limit that opens with time will open (zero if none).
// Slots are not bound to flights: a granted slot goes to the first ready
// flight then (new deliveries first), so a retry waiting for a slot never
// holds back a new delivery.
func (l *loop) startReady(ctx actor.Context, now time.Time) time.Time {
	if l.breaker == nil {
		l.breaker = NewBreaker(l.cfg.Breaker, l.state)
	}
	l.tuneLimiter(now)
	l.slots.promote(l.ready)
	for l.slots.asks < len(l.ready) {
		if l.slots.asks+l.running+l.handover.elsewhere >= l.maxInFlight() {
			l.holds.set(now, holdInFlight)
			return time.Time{} // an outcome pumps again
		}
		if ok, retry := l.lease.allows(ctx, now); !ok {
			l.holds.set(now, holdQuota)
			return retry
		}
		ok, ev := l.breaker.Allow(now)
		if ev != nil {
			l.queueOwn(ev)
		}
		if !ok {
			l.holds.set(now, holdBreaker)
			return l.breaker.Until()
		}
		probe := l.breaker.Probing()
		r := l.limiter.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			if probe {
				l.breaker.Cancel()
			}
			l.holds.set(now, holdRate)
			return now.Add(max(d, 10*time.Millisecond))
		}
		l.holds.set(now, holdNone)
		l.holds.asked(l.ready[l.slots.asks], now)
		c := l.ready[l.slots.asks].class()
		l.lease.use(ctx, now)
		l.slots.ask(ctx, c, probe)
		if probe {
			if l.slots.asks < len(l.ready) {
				l.holds.set(now, holdBreaker) // half-open: the probe is out
			}
			return time.Time{} // one probe; its outcome pumps again
		}
	}
	return time.Time{}
}

// tuneLimiter builds the token bucket, or follows a change of the
// endpoint's rate or burst.
func (l *loop) tuneLimiter(now time.Time) {
	r, b := l.state.rate(l.cfg.RatePerSecond, l.cfg.Burst)
	if l.limiter == nil {
		l.limiter = rate.NewLimiter(rate.Limit(r), b)
		return
	}
	if l.limiter.Limit() != rate.Limit(r) {
		l.limiter.SetLimitAt(now, rate.Limit(r))
	}
	if l.limiter.Burst() != b {
		l.limiter.SetBurstAt(now, b)
	}
}
