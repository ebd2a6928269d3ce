package endpoint

import (
	"context"
	"errors"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
)

// behindWait bounds a pull's wait for the projections to apply what the
// grain settled after its last pull.
const behindWait = 2 * time.Second

// pull asks the due index for the endpoint's due deliveries, off the
// mailbox, without waiting for the projections to apply the grain's own
// appends: the index reflects at least the position the projections had
// applied when the pull began, and onPulled skips what the grain settled
// after it. (Waiting made an endpoint's pulls queue behind whatever the
// projections were applying, another tenant's burst of plans included.)
func (l *loop) pull(ctx actor.Context) {
	l.pulling, l.wantPull = true, false
	idx, proj, now, part := l.cfg.Due, l.cfg.Projections, l.cfg.Now, l.partition()
	id, limit, behind := l.id, l.cfg.PullLimit+len(l.flights), l.behind
	l.behind = events.Start
	l.async(ctx, l.cfg.IOTimeout, func(c context.Context) any {
		if !behind.IsStart() {
			// Wait a little for the projections to pass what the last pull
			// found settled since, then pull anyway: while they lag far
			// behind (a node at its limit), the pull still brings the new
			// work the index has, and skips what the grain settled.
			wctx, cancel := context.WithTimeout(c, behindWait)
			err := proj.WaitForPartition(wctx, part, behind)
			cancel()
			if err != nil && (c.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
				return &pulledDue{err: err}
			}
		}
		applied := proj.Applied() // before the read: the index reflects at least this
		items, err := idx.Pull(id, now(), limit)
		return &pulledDue{items: items, limit: limit, waited: applied, err: err}
	})
}

// onPulled holds the pulled deliveries while the limits need more work.
// The grain pulls again when it is woken (the due index wakes it when it
// adds work for it, and when a retry falls due), or when this pull may have
// left work behind (it got all it asked for, or stopped for lack of room),
// not after every outcome: an endpoint with nothing due must not scan the
// index each time an attempt ends.
func (l *loop) onPulled(ctx actor.Context, m *pulledDue) {
	l.pulling = false
	if m.err != nil {
		switch {
		case errors.Is(m.err, due.ErrNotLive):
			// The partition moved away: the placement stops this grain
			// and the new owner's activation takes over.
			l.log.Info("endpoint grain's partition is not served here; waiting", "error", m.err)
		case !errors.Is(m.err, context.Canceled):
			l.log.Warn("endpoint grain cannot pull due deliveries; retrying", "error", m.err)
		}
		l.arm(ctx, l.cfg.Now().Add(time.Second))
		return
	}
	if len(m.items) >= m.limit {
		l.wantPull = true // the index may hold more
	}
	for _, it := range m.items {
		if _, held := l.flights[it.DeliveryID]; held || it.EndpointID != l.id {
			continue
		}
		at, settled := l.settled[it.DeliveryID]
		if settled && m.waited.Less(at) {
			// The pull was issued before this delivery's outcome was
			// appended: the index showed it as it was before.
			l.log.Debug("a pull returned a delivery settled since; skipped", "delivery_id", it.DeliveryID)
			if l.behind.Less(at) {
				l.behind = at
			}
			continue
		}
		_, stale := l.stale[it.DeliveryID]
		if _, handed := l.handover.handed[it.DeliveryID]; handed {
			// The previous owner's attempt of it ran out of time with no
			// outcome here: read its stream first (loop_handover.go).
			delete(l.handover.handed, it.DeliveryID)
			stale = true
		}
		if settled && !stale && it.Class == due.ClassNew && it.Attempts == 0 && !it.Manual && len(l.stale) < maxStale {
			// The projections applied this outcome, yet the index offers
			// the delivery as it was before: it missed an event.
			l.log.Warn("the due index offers a delivery whose outcome the projections applied; its stream is read before any attempt (hookline reconcile reports the index)", "delivery_id", it.DeliveryID)
			l.stale[it.DeliveryID], stale = struct{}{}, true
		}
		if !l.lowOnWork() {
			l.wantPull = true // more after some progress
			break
		}
		f := &flight{item: it, suspect: stale}
		l.flights[it.DeliveryID] = f
		l.read(ctx, f)
	}
	if len(m.items) < m.limit || len(l.settled) > maxSettled {
		// The pull saw every delivery due now: what it did not return
		// the index has settled. (A full pull may have left out one
		// the index missed; the entries are kept, up to maxSettled.)
		for id, at := range l.settled {
			if !m.waited.Less(at) {
				delete(l.settled, id)
			}
		}
	}
	l.pump(ctx)
}

// maxStale bounds the deliveries a grain remembers the index to have
// missed an event of; maxSettled the settled deliveries it keeps across
// full pulls.
const (
	maxStale   = 4096
	maxSettled = 16384
)
