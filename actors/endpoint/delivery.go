package endpoint

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
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
	// event is the published event: its payload is sent on every attempt.
	event *hooklinev1.EventPublished
}

// readDelivery reads a delivery stream (tens of events at most: attempts
// are bounded), unless withStream is false, and, when the event is not
// known yet (neither given nor in the node's cache), the EventPublished that
// opens the event stream. The stream, not the due index, is the truth: the
// index may lag behind the grain's own appends, so a delivery it still
// shows as due may have ended, or be due later.
func readDelivery(ctx context.Context, log events.Log, cache *eventCache, it due.Item, page int, event *hooklinev1.EventPublished, withStream bool) (deliveryRead, error) {
	r := deliveryRead{autoPending: true, event: event}
	stream := events.DeliveryStream(it.DeliveryID)
	for from := events.Revision(0); withStream; {
		recs, err := log.ReadStream(ctx, stream, events.Forwards, from, page)
		if errors.Is(err, events.ErrStreamNotFound) {
			break
		}
		if err != nil {
			return r, fmt.Errorf("read %s: %w", stream, err)
		}
		for i := range recs {
			msg, err := events.Decode(&recs[i])
			if err != nil {
				return r, err
			}
			r.apply(msg)
			r.rev, r.exists = recs[i].Revision, true
		}
		if len(recs) < page {
			break
		}
		from = r.rev + 1
	}
	if r.event == nil {
		es := eventStream(it)
		if r.event = cache.get(es); r.event != nil {
			return r, nil
		}
		recs, err := log.ReadStream(ctx, es, events.Forwards, 0, 1)
		if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
			return r, fmt.Errorf("read %s: %w", es, err)
		}
		if len(recs) == 1 {
			msg, err := events.Decode(&recs[0])
			if err != nil {
				return r, err
			}
			r.event, _ = msg.(*hooklinev1.EventPublished)
			if r.event != nil {
				cache.put(es, r.event)
			}
		}
	}
	return r, nil
}

// eventStream is the stream of a delivery's event.
func eventStream(it due.Item) string { return events.EventStream(it.TenantID, it.EventID) }

// apply folds one event of a delivery stream.
func (r *deliveryRead) apply(msg proto.Message) {
	switch m := msg.(type) {
	case *hooklinev1.AttemptSucceeded:
		r.countManual(m.GetAttempt())
		r.attempts = max(r.attempts+1, m.GetAttempt().GetNumber())
		r.ended, r.replay, r.autoPending, r.lastNext = true, nil, false, time.Time{}
		r.lastAt = asTime(m.GetAttempt().GetFinishedAt())
	case *hooklinev1.AttemptFailed:
		r.countManual(m.GetAttempt())
		r.attempts = max(r.attempts+1, m.GetAttempt().GetNumber())
		r.replay = nil
		r.lastNext = asTime(m.GetNextAttemptAt())
		r.ended, r.autoPending = r.lastNext.IsZero(), !r.lastNext.IsZero()
		r.lastAt = asTime(m.GetAttempt().GetFinishedAt())
	case *hooklinev1.DeliveryExpired:
		r.ended, r.replay, r.autoPending, r.lastNext = true, nil, false, time.Time{}
		r.lastAt = asTime(m.GetAt())
	case *hooklinev1.ReplayRequested:
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

// attemptRecord is the Attempt shared by the outcome events.
func (g *grain) attemptRecord(f *flight, o attempt.Outcome, number int32) *hooklinev1.Attempt {
	a := &hooklinev1.Attempt{
		TenantId: f.item.TenantID, EndpointId: g.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
		EventType: f.eventType(), Number: number, Manual: f.d.replay != nil, ConfigVersion: g.state.ConfigVersion,
		SecretVersions: o.KeyVersions, StartedAt: timestamppb.New(o.Started), FinishedAt: timestamppb.New(o.Finished),
		LatencyUs: o.Latency.Microseconds(), HttpStatus: int32(o.Status), ErrorClass: o.ErrorClass, Error: o.Error,
		ResponseSha256: o.ResponseSHA256, ResponsePrefix: o.ResponsePrefix,
		IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "delivery"},
	}
	if f.d.replay != nil {
		a.IssuedBy = f.d.replay.GetIssuedBy()
	}
	g.lineage(f, o, a)
	return a
}

func (f *flight) eventType() string {
	if t := f.d.event.GetEventType(); t != "" {
		return t
	}
	return f.item.EventType
}

// nextAttempt decides when the delivery's next automatic attempt runs
// after a retryable failure of attempt number n; zero means none (the
// delivery ends failed).
//
// A manual attempt never starts automatic retries: when the delivery had
// ended, it stays ended. When automatic retries were still pending, their
// schedule is kept: the retry that was due runs as planned (at once if its
// time has passed), so a failed replay neither delays nor hastens them.
//
// The decision, with how it was reached, goes to the attempt's lineage
// (lineage.go).
func (g *grain) nextAttempt(f *flight, n int32, o attempt.Outcome, now time.Time) (time.Time, *hooklinev1.RetryDecision) {
	if f.d.replay != nil {
		if expired := g.expired(f, now); !f.d.autoPending || expired {
			return time.Time{}, manualDecision(o, expired, time.Time{})
		}
		if !f.d.lastNext.IsZero() {
			next := maxTime(f.d.lastNext, now)
			return next, manualDecision(o, false, next)
		}
	}
	s := g.cfg.Schedule
	if m := g.state.Config.GetMaxAttempts(); m > 0 {
		s.MaxAttempts = int(m)
	}
	planned := f.item.PlannedAt
	if planned.IsZero() {
		planned = now
	}
	if exp := f.item.ExpiresAt; !exp.IsZero() && exp.After(planned) {
		s.Deadline = exp.Sub(planned)
	}
	plan := s.Plan(int(n), planned, now, o.RetryDelay(), g.cfg.Jitter)
	return plan.Next, retryDecision(o, plan, s.MaxAttempts, planned.Add(s.Deadline))
}

// expired reports whether a delivery is past its deadline at now. The
// schedule puts the last retry exactly at the deadline; that one still
// runs (it is due at, not before, expires_at), so a retry due at the
// deadline is not expired when found a little late. The due time is the
// stream's next_attempt_at when the stream was read (the index's may be
// stale), else the index's.
func (g *grain) expired(f *flight, now time.Time) bool {
	exp, dueAt := f.item.ExpiresAt, f.item.DueAt
	if !f.d.lastNext.IsZero() {
		dueAt = f.d.lastNext
	}
	return !exp.IsZero() && !now.Before(exp) && dueAt.Before(exp)
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

func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
