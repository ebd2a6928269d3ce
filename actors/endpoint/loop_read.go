package endpoint

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// deliveryRead is what a delivery's streams say.
type deliveryRead struct {
	// rev and exists: where the delivery stream ends (the expected revision
	// of the next append).
	rev    events.Revision
	exists bool
	// attempts recorded so far, manual ones included; manuals, the manual
	// ones; autosBefore, the automatic ones before the delivery was planned
	// again (see replanned), for the retry numbers of its lineage.
	attempts, manuals, autosBefore int32
	// ended: its last outcome ended it (succeeded, failed terminally or
	// expired) and no replay is pending.
	ended bool
	// replay is the pending ReplayRequested, when the next attempt is a
	// manual one; autoPending says whether automatic retries were still due
	// when it was requested, and lastNext when the last one was scheduled.
	replay      *hooklinev1.ReplayRequested
	autoPending bool
	lastNext    time.Time
	// lastAt is when its last outcome was recorded (zero: none yet).
	lastAt time.Time
	// requested are the request ids and recovery ids of the replays its
	// stream holds: a retried replay command, or a recovery resumed after a
	// restart, does not replay it twice.
	requested []string
	// event is the published event: its payload (opened) is sent on every
	// attempt. erased: its payload was erased, and event is nil.
	event  *hooklinev1.EventPublished
	erased bool
	// fromArchive: event was read from the archive (see reader.archived).
	fromArchive bool
	// ord is the delivery's ordering key and sequences (loop_order.go).
	ord ordering
}

// reader reads deliveries for a grain, off its mailbox.
type reader struct {
	log      events.Log
	cache    *eventCache
	payloads *seal.Payloads
	archive  events.StreamArchive
	page     int
	seqs     Sequences // nil: the node counts no sequences
}

// readDelivery reads a delivery stream (tens of events at most: attempts
// are bounded), unless withStream is false, and, when the event is not
// known yet (neither given nor in the node's cache), the EventPublished that
// opens the event stream. The stream, not the due index, is the truth: the
// index may lag behind the grain's own appends, so a delivery it still
// shows as due may have ended, or be due later.
//
// An ordered delivery whose payload is not erased is numbered then (see
// reader.number).
func (rd reader) readDelivery(ctx context.Context, it due.Item, event *hooklinev1.EventPublished, withStream bool) (deliveryRead, error) {
	r, err := rd.readStreams(ctx, it, event, withStream)
	if err != nil || r.erased {
		return r, err
	}
	return r, rd.number(ctx, it, &r.ord)
}

// readStreams is readDelivery's reading.
func (rd reader) readStreams(ctx context.Context, it due.Item, event *hooklinev1.EventPublished, withStream bool) (deliveryRead, error) {
	log, cache := rd.log, rd.cache
	r := deliveryRead{autoPending: true, event: event}
	if withStream {
		err := command.ReadStream(ctx, log, events.DeliveryStream(it.DeliveryID), rd.page, func(msg proto.Message, rev events.Revision) {
			r.apply(msg)
			r.rev, r.exists = rev, true
		})
		if err != nil {
			return r, err
		}
	}
	if r.event == nil {
		es := eventStream(it)
		if r.event = cache.get(es); r.event != nil {
			return r, nil
		}
		recs, err := log.ReadStream(ctx, es, events.Forwards, 0, 1)
		if errors.Is(err, events.ErrStreamNotFound) && rd.archive != nil {
			recs, err = rd.archived(ctx, es)
			r.fromArchive = len(recs) == 1
		}
		if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
			return r, fmt.Errorf("read %s: %w", es, err)
		}
		if len(recs) == 1 {
			msg, err := events.Decode(&recs[0])
			if err != nil {
				return r, err
			}
			r.event, _ = msg.(*hooklinev1.EventPublished)
			if r.event, err = rd.payloads.OpenEvent(ctx, r.event); errors.Is(err, seal.ErrErased) {
				r.event, r.erased = nil, true
			} else if err != nil {
				return r, fmt.Errorf("open the payload of %s: %w", es, err)
			}
			if r.event != nil && !r.fromArchive {
				cache.put(es, r.event)
			}
		}
	}
	return r, nil
}

// archived reads an event stream's first record from the archive: the log
// dropped it past retention. Not cached: a late replay is rare, and its
// attempt says where its bytes came from.
func (rd reader) archived(ctx context.Context, stream string) ([]events.Record, error) {
	recs, err := rd.archive.ReadStream(ctx, stream)
	if err != nil {
		return nil, err
	}
	return recs[:min(len(recs), 1)], nil
}

// eventStream is the stream of a delivery's event.
func eventStream(it due.Item) string { return events.EventStream(it.TenantID, it.EventID) }

// apply folds one event of a delivery stream.
func (r *deliveryRead) apply(msg proto.Message) {
	switch m := msg.(type) {
	case *hooklinev1.AttemptSucceeded:
		r.ord.sentWith(m.GetAttempt().GetOrderingKey(), m.GetAttempt().GetSequence())
		r.countManual(m.GetAttempt())
		r.attempts = max(r.attempts+1, m.GetAttempt().GetNumber())
		r.ended, r.replay, r.autoPending, r.lastNext = true, nil, false, time.Time{}
		r.lastAt = asTime(m.GetAttempt().GetFinishedAt())
	case *hooklinev1.AttemptFailed:
		r.ord.sentWith(m.GetAttempt().GetOrderingKey(), m.GetAttempt().GetSequence())
		r.countManual(m.GetAttempt())
		r.attempts = max(r.attempts+1, m.GetAttempt().GetNumber())
		r.replay = nil
		r.lastNext = asTime(m.GetNextAttemptAt())
		r.ended, r.autoPending = r.lastNext.IsZero(), !r.lastNext.IsZero()
		r.lastAt = asTime(m.GetAttempt().GetFinishedAt())
	case *hooklinev1.DeliveryExpired:
		r.ended, r.replay, r.autoPending, r.lastNext = true, nil, false, time.Time{}
		r.lastAt = asTime(m.GetAt())
	case *hooklinev1.OrderingKeySkipped:
		// A pending head ends; a pending replay of it is cancelled.
		r.ended, r.replay, r.autoPending, r.lastNext = true, nil, false, time.Time{}
	case *hooklinev1.ReplayRequested:
		r.ord.sentWith(m.GetOrderingKey(), m.GetSequence())
		if r.replay == nil {
			r.autoPending = !r.ended
		}
		r.replay, r.ended = m, false
		for _, id := range []string{m.GetRequestId(), m.GetRecoveryId()} {
			if id != "" && !slices.Contains(r.requested, id) {
				r.requested = append(r.requested, id)
			}
		}
	}
}

// countManual counts a manual attempt of the stream.
func (r *deliveryRead) countManual(a *hooklinev1.Attempt) {
	if a.GetManual() {
		r.manuals++
	}
}
