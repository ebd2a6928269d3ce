package endpoint

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// stage is where a held delivery stands.
type stage uint8

const (
	stageReading   stage = iota // its streams are being read
	stageReady                  // waiting for the limits and a slot
	stageRunning                // the HTTP attempt is out
	stageRecording              // its outcome is being appended
	stageLeased                 // pulled by the consumer of a pull endpoint, not acknowledged yet
	stageElsewhere              // attempted by the member that handed the partition over (loop_handover.go)
)

// flight is a delivery the grain holds, from the pull (or the replay
// order) until its outcome is durable. While held, later pulls skip it,
// and every append to its stream goes through it, one at a time.
type flight struct {
	item  due.Item
	stage stage
	// d is what its streams say, kept up to date with the grain's appends.
	d deliveryRead
	// fresh is set for a first attempt of a new delivery whose stream was
	// not read (there is nothing in it yet): its outcome is appended
	// expecting no stream, and read then if there is one after all.
	fresh bool
	// suspect is set for a delivery the due index offered although the
	// grain settled it: its stream is read, never taken for fresh.
	suspect bool

	probe bool // the breaker's half-open probe
	// outcome is the attempt's result, kept until it is durable: it is
	// recorded again against the stream if a fresh flight's stream existed.
	outcome *attempt.Outcome
	// responseSeal seals outcome's response prefix (nil: in clear).
	responseSeal *hooklinev1.PayloadSeal
	// replays are replays that came while the delivery was held; they are
	// carried out once its current outcome is durable. asking is the one
	// whose ReplayRequested is being appended.
	replays []*replayOrder
	asking  *replayOrder
	// skipping is the skip of its ordering key's head it is held for.
	skipping *skipOrder
	// leasedAt and leasedUntil are its lease to a pull consumer.
	leasedAt, leasedUntil time.Time
	// lin is what its current attempt noted on its way (loop_lineage.go).
	lin flightLineage
	// busy is set from the start of an attempt until its outcome is
	// recorded (or the flight is let go): Drain counts it.
	busy bool
	// unsent is set while the outcome being recorded sent nothing (the
	// delivery ends without a request, or its request could not be
	// made): it carries no new sequence.
	unsent bool
	// elsewhere is, in stageElsewhere, the previous owner's attempt.
	elsewhere Running
}

// class is what f asks a slot for: a replay asks as a retry, whatever
// its item says.
func (f *flight) class() due.Class {
	if f.item.Class == due.ClassNew && f.d.replay == nil {
		return due.ClassNew
	}
	return due.ClassRetry
}

func (f *flight) eventType() string {
	if t := f.d.event.GetEventType(); t != "" {
		return t
	}
	return f.item.EventType
}

// expired reports whether a delivery is past its deadline at now. The
// schedule puts the last retry exactly at the deadline; that one still
// runs (it is due at, not before, expires_at), so a retry due at the
// deadline is not expired when found a little late. The due time is the
// stream's next_attempt_at when the stream was read (the index's may be
// stale), else the index's.
func (f *flight) expired(now time.Time) bool {
	exp, dueAt := f.item.ExpiresAt, f.item.DueAt
	if !f.d.lastNext.IsZero() {
		dueAt = f.d.lastNext
	}
	return !exp.IsZero() && !now.Before(exp) && dueAt.Before(exp)
}

// replanned reports whether an ended delivery was planned again after it
// ended: its event id was published anew once its event stream had expired
// while its delivery stream survived. The plan is new work on the same
// delivery id, attempted on the same stream; without this, its item would
// stay due forever, dropped on every pull.
func (f *flight) replanned() bool {
	if f.item.Class != due.ClassNew || f.item.PlannedAt.IsZero() || !f.item.PlannedAt.After(f.d.lastAt) {
		return false
	}
	f.d.ended, f.d.autoPending, f.d.lastNext = false, true, time.Time{}
	f.d.autosBefore = f.d.attempts - f.d.manuals
	return true
}

type (
	readDone struct {
		id  string
		r   deliveryRead
		err error
	}
	slotGranted struct{}
	attemptDone struct {
		id string
		o  attempt.Outcome
		// responseSeal seals o.ResponsePrefix (see sealResponse).
		responseSeal *hooklinev1.PayloadSeal
		// erased: the payload was erased before the request was sent,
		// and nothing was (o is empty).
		erased bool
	}
)

// read reads a flight's delivery stream and event off the mailbox. A
// first attempt of a new delivery reads only the event, and not even that
// when the node's cache has it; an ordered one the due index did not
// number is numbered off the mailbox (loop_order.go). Its stream need not
// be read for that: were an earlier attempt's outcome in it and not yet
// in the index, that attempt was numbered from the same count, and the
// append finds the stream (recordAgain).
func (l *loop) read(ctx actor.Context, f *flight) {
	f.stage = stageReading
	f.fresh = !f.suspect && f.item.Class == due.ClassNew && !f.item.Manual && f.item.Attempts == 0 && f.d.event == nil && len(f.replays) == 0
	if f.fresh {
		if ev := l.cfg.events.get(eventStream(f.item)); ev != nil {
			f.d = deliveryRead{autoPending: true, event: ev}
			if f.item.OrderingKey == "" || f.numbered(l.cfg.Payloads) {
				l.settle(ctx, f)
				return
			}
		}
	}
	l.readAsync(ctx, f, !f.fresh)
}

// readAsync reads a flight's streams off the mailbox (see readDelivery);
// readDone brings the answer.
func (l *loop) readAsync(ctx actor.Context, f *flight, withStream bool) {
	l.reading++
	rd := reader{log: l.cfg.Log, cache: l.cfg.events, payloads: l.cfg.Payloads, archive: l.cfg.Archive, page: l.cfg.ReadPage, seqs: l.cfg.Sequences}
	it, ev := f.item, f.d.event
	l.async(ctx, l.cfg.IOTimeout, func(c context.Context) any {
		r, err := rd.readDelivery(c, it, ev, withStream)
		return &readDone{id: it.DeliveryID, r: r, err: err}
	})
}

// onRead continues a flight whose streams were read: it records again
// the outcome of a fresh flight whose stream existed, appends waiting
// replays, or settles it.
func (l *loop) onRead(ctx actor.Context, m *readDone) {
	l.reading--
	f := l.flights[m.id]
	if f == nil || f.stage != stageReading {
		return
	}
	if m.err != nil {
		// It stays due; the next wake (at the latest the sweeper's) tries
		// again.
		l.log.Warn("endpoint grain cannot read a delivery", "delivery_id", m.id, "error", m.err)
		l.drop(ctx, f)
		l.pump(ctx)
		return
	}
	f.d = m.r
	f.ordered()
	if f.outcome != nil {
		l.recordAgain(ctx, f) // a fresh flight's stream existed after all
		return
	}
	if f.skipping != nil {
		l.skips.record(ctx, f)
		return
	}
	if len(f.replays) > 0 {
		l.replays.appendNext(ctx, f)
		return
	}
	l.settle(ctx, f)
	l.pump(ctx)
}

// settle decides what a flight whose streams are known needs: nothing yet
// (it ended, or it is not due before the time its stream says), an end
// without attempt (deleted endpoint, deadline passed, event gone) or an
// attempt (it joins the ready flights). The caller pumps.
func (l *loop) settle(ctx actor.Context, f *flight) {
	now := l.cfg.Now()
	switch {
	case f.d.ended && !f.replanned():
		l.drop(ctx, f)
	case l.state.Deleted:
		l.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE, "the endpoint was deleted before the attempt")
	case f.d.replay == nil && f.expired(now):
		l.expire(ctx, f, now)
	case f.d.replay == nil && f.d.lastNext.After(now):
		// The stream says later than the index did (a stale view): never
		// before the stream's next_attempt_at.
		l.drop(ctx, f)
		l.noteDue(f.d.lastNext)
	case f.erased(l.cfg.Payloads):
		l.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ERASED, erasedText)
	case f.d.event == nil:
		l.eventMissing(ctx, f, now)
	default:
		l.enqueue(f)
	}
}

// erasedText is the error of a delivery ended because its payload was
// erased.
const erasedText = "the tenant's payloads were erased before the attempt"

// erased reports whether a flight's payload was erased: its read found
// it so, or the erasure of the key it is sealed under has been applied
// since (payloads says). Checked when the flight settles, when it gets its
// slot, and just before its request is sent.
func (f *flight) erased(payloads *seal.Payloads) bool {
	return f.d.erased || payloads.Erased(f.item.TenantID, f.d.event.GetPayloadSeal().GetDataKeyId())
}

// eventMissing handles a delivery whose event stream was not found. After
// the log's retention (the event is gone for good) the delivery ends
// failed. Before it, the stream must exist (it is written before the plan
// that made the delivery), so the read saw a backend that lags (a follower
// behind its leader): the delivery stays due and is read again shortly.
func (l *loop) eventMissing(ctx actor.Context, f *flight, now time.Time) {
	if planned := f.item.PlannedAt; !planned.IsZero() && now.Sub(planned) < l.cfg.EventRetention {
		l.log.Warn("endpoint grain did not find a delivery's event; reading it again shortly", "delivery_id", f.item.DeliveryID)
		l.drop(ctx, f)
		l.noteDue(now.Add(eventRetryDelay))
		return
	}
	l.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, "the event is no longer in the log (retention)")
}

// eventRetryDelay is how long a delivery whose event was not found waits
// before it is read again.
const eventRetryDelay = 5 * time.Second

// expire ends a delivery past its deadline without an attempt.
func (l *loop) expire(ctx actor.Context, f *flight, now time.Time) {
	l.record(ctx, f, &hooklinev1.DeliveryExpired{
		TenantId: f.item.TenantID, EndpointId: l.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
		Attempts: f.d.attempts, ExpiresAt: timestamppb.New(f.item.ExpiresAt), At: timestamppb.New(now),
	})
}

// recordGone ends a delivery as failed without an HTTP attempt.
func (l *loop) recordGone(ctx actor.Context, f *flight, class hooklinev1.ErrorClass, text string) {
	now := l.cfg.Now()
	o := attempt.Outcome{Started: now, Finished: now, ErrorClass: class, Error: text}
	f.unsent = true
	a := attemptRecord(l.id, l.state, f, o, f.d.attempts+1)
	a.Retry = endedDecision(text)
	l.record(ctx, f, &hooklinev1.AttemptFailed{Attempt: a})
}
