package endpoint

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// partition is the delivery partition of the grain's endpoint: that of
// every event it appends to its deliveries' streams.
func (l *loop) partition() events.Partition { return events.PartitionOf(l.id) }

// recorded is the result of an append to a delivery stream.
type recorded struct {
	id   string
	msgs []proto.Message
	res  events.AppendResult
	err  error
}

// record appends msgs to the flight's delivery stream, off the mailbox,
// with the revision the flight holds as the expected one ("no stream" for
// a fresh flight).
func (l *loop) record(ctx actor.Context, f *flight, msgs ...proto.Message) {
	f.stage = stageRecording
	stream := events.DeliveryStream(f.item.DeliveryID)
	evs := make([]events.Event, len(msgs))
	for i, m := range msgs {
		rev := events.Revision(i)
		if f.d.exists {
			rev = f.d.rev + 1 + events.Revision(i)
		}
		ev, err := encodeDelivery(l.incarnation, stream, l.partition(), rev, m)
		if err != nil {
			l.log.Error("endpoint grain cannot encode a delivery event", "delivery_id", f.item.DeliveryID, "error", err)
			l.drop(ctx, f)
			return
		}
		evs[i] = ev
	}
	log, id, expected := l.cfg.Log, f.item.DeliveryID, events.ExpectAfter(f.d.rev, f.d.exists)
	l.async(ctx, l.cfg.IOTimeout, func(c context.Context) any {
		res, err := log.Append(c, stream, expected, evs...)
		return &recorded{id: id, msgs: msgs, res: res, err: err}
	})
}

// onRecorded continues once an append to a delivery stream came back: a
// fresh flight whose stream existed is read and recorded again, a lost
// ownership or a failed append stops the grain, and a durable outcome
// settles the flight.
func (l *loop) onRecorded(ctx actor.Context, m *recorded) {
	f := l.flights[m.id]
	if f == nil {
		return
	}
	switch {
	case m.err == nil:
	case errors.Is(m.err, events.ErrWrongRevision) && f.fresh && f.outcome != nil:
		// A first attempt whose stream was not read, and exists: read it,
		// and settle the outcome against it (recordAgain).
		f.fresh = false
		l.log.Debug("a new delivery's stream exists; reading it", "delivery_id", m.id)
		f.stage = stageReading
		l.readAsync(ctx, f, true)
		return
	case errors.Is(m.err, events.ErrWrongRevision):
		l.log.Warn("endpoint grain lost ownership of a delivery stream; stopping", "delivery_id", m.id, "revision", uint64(f.d.rev), "error", m.err)
		l.cfg.Quarantine.Lost(l.id, l.cfg.Now())
		l.core.Stop(ctx, internalv1.GrainError_CODE_ABORTED, "another activation of the endpoint grain owns its deliveries now; retry")
		return
	default:
		// It may or may not have landed: stop, and let the next activation
		// read the truth.
		l.log.Error("endpoint grain cannot record a delivery event; stopping", "delivery_id", m.id, "error", m.err)
		l.core.Stop(ctx, internalv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain stopped; retry")
		return
	}
	f.d.rev, f.d.exists, f.fresh, f.outcome, f.unsent = m.res.Revision, true, false, nil, false
	l.log.Debug("delivery event recorded", "delivery_id", m.id, "revision", uint64(m.res.Revision))
	replayOf := f.d.replay
	for _, msg := range m.msgs {
		f.d.apply(msg)
	}
	if _, ok := m.msgs[0].(*hooklinev1.ReplayRequested); ok {
		l.replays.recorded(ctx, f)
		return
	}
	if _, ok := m.msgs[0].(*hooklinev1.OrderingKeySkipped); ok {
		l.skips.recorded(ctx, f, m.res.Position)
		return
	}
	// An outcome: the flight is settled.
	l.unbusy(f)
	exportSpans(l.cfg.Spans, m.msgs)
	f.lin = flightLineage{}
	if replayOf != nil {
		l.recovery.progress(replayOf.GetRecoveryId())
	}
	if len(f.replays) > 0 {
		l.replays.appendNext(ctx, f)
		return
	}
	delete(l.flights, m.id)
	l.settled[m.id] = m.res.Position
	if !f.d.ended && !f.d.lastNext.After(l.cfg.Now()) {
		// Due again already (a retry kept on schedule after a replay, or
		// a clock that moved while the outcome was appended): a wake that
		// came meanwhile found the delivery held, so pull for it now.
		l.wantPull = true
	}
	l.pump(ctx) // room for the work a pull left behind (wantPull)
}

// recordAgain settles the outcome of a fresh flight whose stream existed
// after all. If the stream holds an outcome this activation did not write
// since the delivery was planned, another activation attempted it: this
// one stops (fencing). Otherwise (a replay was requested before its first
// attempt, or the delivery was planned again after it ended) the outcome
// is recorded after what the stream holds, numbered and marked as it says.
func (l *loop) recordAgain(ctx actor.Context, f *flight) {
	if f.d.attempts > 0 && !f.d.lastAt.Before(f.item.PlannedAt) {
		l.log.Warn("endpoint grain lost ownership of a delivery stream; stopping (another activation attempted this new delivery)", "delivery_id", f.item.DeliveryID, "revision", uint64(f.d.rev))
		l.cfg.Quarantine.Lost(l.id, l.cfg.Now())
		l.core.Stop(ctx, internalv1.GrainError_CODE_ABORTED, "another activation of the endpoint grain owns its deliveries now; retry")
		return
	}
	if f.d.ended { // planned again after it ended
		f.d.ended, f.d.autoPending, f.d.lastNext = false, true, time.Time{}
		f.d.autosBefore = f.d.attempts - f.d.manuals
	}
	o := *f.outcome
	ev, next := outcomeEvent(l.cfg, l.id, l.state, f, o, l.cfg.Now())
	l.noteDue(next)
	l.record(ctx, f, ev)
}

// unbusy marks f as no longer attempting (its outcome is recorded, or it
// is let go), for the node's Drain, which counted it from the start of its
// attempt (Drain.Begin).
func (l *loop) unbusy(f *flight) {
	if f.busy {
		f.busy = false
		l.busy--
		l.cfg.Drain.End(l.id, f.item.DeliveryID)
	}
}

// drop lets go of a flight without an outcome: it stays due, or it had
// ended. Replays waiting on it are answered, as for a replay that could
// not start. ctx may be nil when no replay waits (a paused endpoint lets
// go of its ready flights).
func (l *loop) drop(ctx actor.Context, f *flight) {
	l.unbusy(f)
	delete(l.flights, f.item.DeliveryID)
	for _, o := range f.replays {
		l.replays.abandon(ctx, o, internalv1.GrainError_CODE_UNAVAILABLE, "the delivery could not be read; retry")
	}
	f.replays = nil
	if o := f.skipping; o != nil {
		reply(ctx, o.sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "the key's head could not be read; retry the skip"))
		f.skipping = nil
	}
}

// letGo forgets a flight without an outcome (it stays due, or it ended);
// its replays and skip have been answered.
func (l *loop) letGo(f *flight) {
	l.unbusy(f)
	l.leased.forget(f)
	if f.stage == stageElsewhere {
		l.handover.elsewhere--
		if l.cfg.Outcomes != nil {
			l.cfg.Outcomes.Unwatch(f.item.DeliveryID)
		}
	}
	delete(l.flights, f.item.DeliveryID)
}

// encodeDelivery gives a delivery event of partition p a deterministic id whose cause is
// the activation, the revision it goes to and a digest of its content: a
// retried append is idempotent, while another activation appending at the
// same revision, even the very same outcome (two activations attempting at
// the same instant get identical answers), gets another id and fails with a
// wrong revision instead of passing for a retry.
func encodeDelivery(incarnation, stream string, p events.Partition, rev events.Revision, m proto.Message) (events.Event, error) {
	data, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return events.Event{}, fmt.Errorf("encode %s: %w", events.TypeOf(m), err)
	}
	sum := sha256.Sum256(data)
	return events.EncodeIn(m, fmt.Sprintf("delivery.%s@%d/%x/%s", events.TypeOf(m), uint64(rev), sum[:8], incarnation), stream, p)
}
