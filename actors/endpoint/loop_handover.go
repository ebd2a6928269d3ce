package endpoint

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// A partition that moves between members while its attempts run. The old
// owner records the move at once, listing the attempts it still runs (the
// node's partition manager); then:
//
//   - its grain retires (retire): it starts nothing, pulls nothing,
//     answers no command (UNAVAILABLE: the caller retries and reaches the
//     new owner), appends nothing to the endpoint stream, lets go of every
//     delivery it holds but those it is attempting, records their
//     outcomes and stops;
//   - the new owner's grain starts at once and holds the deliveries of
//     those attempts (stageElsewhere) without attempting them, counted
//     against its in-flight limit, until their outcomes are applied here
//     (the due index wakes it: the delivery is then due again or not, as
//     any other) or the attempt has run out of time on the old owner (its
//     stream is then read before any attempt here, which fences a late
//     outcome). So the move's pause does not wait for the running
//     attempts, and none is cut or repeated;
//   - a skip of an ordering key's head that comes before the new grain
//     knows which of them it holds waits until it does (loop_skip.go), and
//     is then refused as a skip under the grain's own attempt is, while the
//     head's attempt may still run elsewhere.
//
// The record of the next move, and a takeover from a member that dies,
// lists the attempts the table still lists as running on an earlier owner,
// beside its own (node's passOn, ADR 0067): within an attempt's time a
// third owner holds it as the second did.

// msgMoved is a retiring grain's refusal.
const msgMoved = "the endpoint's partition moved to another member; retry"

// handover carries out, on the loop, the moves of the endpoint's
// partition between members: retiring from the old owner, and holding
// the deliveries of the attempts it still ran on the new one. Owned by the
// actor, like the loop.
type handover struct {
	l *loop
	// elsewhere counts the flights in stageElsewhere; checking is set
	// while their outcomes are looked up and recheck when a wake came
	// meanwhile.
	elsewhere         int
	checking, recheck bool
	// handed are the deliveries whose previous owner's attempt ran out of
	// time unrecorded, whose stream the next pull reads first.
	handed map[string]struct{}
	// retiring is set once the placement gave the endpoint to another
	// member.
	retiring bool
}

// retire lets go of everything the grain holds but the deliveries it is
// attempting or appending to (their outcomes are recorded here), and
// reports whether it holds nothing any more: the grain stops then.
func (h *handover) retire(ctx actor.Context) bool {
	l := h.l
	h.retiring = true
	l.own = nil
	l.recovery.run = nil // resumed by the new owner from the endpoint stream
	l.skips.refuseWaiting(ctx, &internalv1.GrainError{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: msgMoved})
	for _, o := range l.replays.waiting {
		l.replays.abandon(ctx, o, internalv1.GrainError_CODE_UNAVAILABLE, msgMoved)
	}
	l.replays.waiting = nil
	if l.timer != nil {
		l.timer()
		l.timer, l.timerAt = nil, time.Time{}
	}
	return h.retireStep(ctx)
}

// retireStep lets go of the flights a retiring grain does not finish, and
// stops the grain once none is left. It reports whether it stopped.
func (h *handover) retireStep(ctx actor.Context) bool {
	l := h.l
	l.ready = nil
	for _, f := range l.flights {
		if f.busy || f.stage == stageRecording {
			continue // its append is under way: recorded here
		}
		for _, o := range f.replays {
			l.replays.abandon(ctx, o, internalv1.GrainError_CODE_UNAVAILABLE, msgMoved)
		}
		f.replays = nil
		if o := f.skipping; o != nil {
			reply(ctx, o.sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, msgMoved))
			f.skipping = nil
		}
		l.letGo(f)
	}
	if len(l.flights) > 0 {
		return false
	}
	l.core.Stop(ctx, internalv1.GrainError_CODE_UNAVAILABLE, msgMoved)
	return true
}

// retiringWork reports whether a retiring grain handles msg as usual:
// the messages that carry its remaining attempts and appends on (their
// handlers pump, and pump goes no further than retireStep). Of the others
// it notes only that their I/O has ended.
func (h *handover) retiringWork(msg any) bool {
	switch msg.(type) {
	case *attemptDone, *recorded, *readDone, *slotGranted, *leaseReply:
		return true
	case *pulledDue:
		h.l.pulling = false
	case *elsewhereChecked:
		h.checking = false
	}
	return false
}

// awaitPredecessor holds, as the grain starts, the deliveries that the
// member which handed the endpoint's partition to this node was still
// attempting then, and looks up whether their outcomes are applied.
func (h *handover) awaitPredecessor(ctx actor.Context) {
	l := h.l
	if l.cfg.StillRunning == nil || l.cfg.Outcomes == nil {
		return
	}
	now := l.cfg.Now()
	for _, r := range l.cfg.StillRunning(l.id) {
		if r.EndpointID != l.id || !now.Before(r.Until) || l.flights[r.DeliveryID] != nil {
			continue
		}
		// Watched before it is looked up: an outcome applied in between
		// still wakes the grain.
		l.cfg.Outcomes.Watch(r.DeliveryID, r.Until)
		l.flights[r.DeliveryID] = &flight{
			item:  due.Item{DeliveryID: r.DeliveryID, EndpointID: l.id},
			stage: stageElsewhere, elsewhere: r,
		}
		h.elsewhere++
	}
	if h.elsewhere > 0 {
		l.log.Debug("endpoint grain waits for the attempts its partition's previous owner still runs", "attempts", h.elsewhere)
		h.checkElsewhere(ctx)
	}
}

// elsewhereChecked says which of the previous owner's attempts have their
// outcome applied, and what the projections had applied after the lookup.
type elsewhereChecked struct {
	done    []string
	applied events.Position
	err     error
}

// checkElsewhere looks up, off the mailbox, whether the outcomes of the
// previous owner's attempts are applied: once its grain is woken (the due
// index wakes it for each such outcome) and when it starts.
func (h *handover) checkElsewhere(ctx actor.Context) {
	l := h.l
	if h.elsewhere == 0 {
		return
	}
	if h.checking {
		h.recheck = true
		return
	}
	var rs []Running
	for _, f := range l.flights {
		if f.stage == stageElsewhere {
			rs = append(rs, f.elsewhere)
		}
	}
	h.checking = true
	out, proj := l.cfg.Outcomes, l.cfg.Projections
	l.async(ctx, l.cfg.IOTimeout, func(context.Context) any {
		var done []string
		for _, r := range rs {
			it, ok, err := out.Get(r.DeliveryID)
			if err != nil {
				return &elsewhereChecked{err: err}
			}
			if !ok || it.Attempts >= r.Attempt {
				done = append(done, r.DeliveryID)
			}
		}
		// After the lookups: the projections have applied at least the
		// outcomes they found.
		return &elsewhereChecked{done: done, applied: proj.Applied()}
	})
}

// onElsewhereChecked lets go of the deliveries whose outcome the previous
// owner recorded and this node applied: due again or not, they are pulled
// as any other. A pull that read the index before that outcome skips them
// (settled).
func (h *handover) onElsewhereChecked(ctx actor.Context, m *elsewhereChecked) {
	l := h.l
	h.checking = false
	if m.err != nil {
		l.log.Warn("endpoint grain cannot look up the outcome of an attempt its partition's previous owner ran; looking again shortly", "error", m.err)
		h.recheck = false
		l.arm(ctx, l.cfg.Now().Add(time.Second))
		return
	}
	for _, id := range m.done {
		f := l.flights[id]
		if f == nil || f.stage != stageElsewhere {
			continue
		}
		l.settled[id] = m.applied
		h.releaseElsewhere(f)
	}
	if h.recheck {
		h.recheck = false
		h.checkElsewhere(ctx)
	}
	l.wantPull = true
	l.pump(ctx)
}

// releaseElsewhere lets go of a delivery the previous owner attempted; the
// replays that came for it meanwhile wait for room among the flights.
func (h *handover) releaseElsewhere(f *flight) {
	h.l.replays.waiting = append(h.l.replays.waiting, f.replays...)
	f.replays = nil
	h.l.letGo(f)
}

// expireElsewhere lets go of the deliveries whose attempt has run out of
// time on the previous owner with no outcome applied here: their streams
// are read before they are attempted (a late outcome fences this grain's
// append). It returns when the next of those left runs out (zero: none).
func (h *handover) expireElsewhere(now time.Time) time.Time {
	l := h.l
	var next time.Time
	for id, f := range l.flights {
		if f.stage != stageElsewhere {
			continue
		}
		if now.Before(f.elsewhere.Until) {
			next = earliestOf(next, f.elsewhere.Until)
			continue
		}
		l.log.Warn("the attempt of a delivery that the partition's previous owner ran is out of time with no outcome recorded; its stream is read before it is attempted here", "delivery_id", id)
		if len(h.handed) < maxStale {
			h.handed[id] = struct{}{}
		}
		h.releaseElsewhere(f)
		l.wantPull = true
	}
	return next
}
