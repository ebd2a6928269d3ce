package endpoint

import (
	"fmt"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// replayOrder is one replay to carry out: from a command (sender set) or
// from a bulk recovery (recoveryID set).
type replayOrder struct {
	sender     *actor.PID
	by         *hooklinev1.Actor
	requestID  string
	recoveryID string
	view       history.Delivery
}

// replays carries out the endpoint's replays on its loop: each holds its
// delivery as a flight, through which its ReplayRequested is appended, and
// the manual attempt follows as any other. Owned by the actor, like the
// loop.
type replays struct {
	l *loop
	// waiting are replay orders waiting for room among the flights.
	waiting []*replayOrder
}

// start holds the delivery (reading its streams first if it was not held)
// and appends its ReplayRequested as soon as no other append to its stream
// is under way. Without room among the flights, the order waits.
func (r *replays) start(ctx actor.Context, o *replayOrder) {
	l, d := r.l, o.view
	f := l.flights[d.ID]
	if f == nil && d.OrderingKey != "" && d.Status == history.Pending && d.Attempts == 0 {
		// An ordered delivery not attempted yet waits for its key's turn
		// (or is about to be attempted): a replay would break the order.
		r.abandon(ctx, o, internalv1.GrainError_CODE_FAILED_PRECONDITION, fmt.Sprintf(
			"delivery %s waits for its turn on ordering key %q: it is attempted once the key's earlier deliveries have ended; skip the key's head to let it go sooner", d.ID, d.OrderingKey))
		return
	}
	if f == nil {
		if len(l.flights) >= l.capacity() {
			if o.sender != nil {
				r.abandon(ctx, o, internalv1.GrainError_CODE_UNAVAILABLE, "the endpoint holds as many deliveries as it may; retry the replay later")
				return
			}
			r.waiting = append(r.waiting, o) // a recovery's: at most a page
			return
		}
		f = &flight{item: due.Item{
			DeliveryID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType, EndpointID: d.EndpointID,
			ConfigVersion: d.ConfigVersion, Class: due.ClassRetry, Manual: true, DueAt: l.cfg.Now(),
			PlannedAt: d.PlannedAt, ExpiresAt: d.ExpiresAt,
			// Sent with its key, and the sequence it was sent with if it
			// was (its stream says: loop_order.go), outside the key's
			// turn: a person asked for it.
			OrderingKey: d.OrderingKey,
		}}
		f.replays = []*replayOrder{o}
		l.flights[d.ID] = f
		l.read(ctx, f)
		return
	}
	f.replays = append(f.replays, o)
	if f.stage == stageReady {
		l.ready = slices.DeleteFunc(l.ready, func(x *flight) bool { return x == f })
		r.appendNext(ctx, f)
	}
	// Otherwise onRead or onRecorded carries it out.
}

// startWaiting starts the waiting replay orders while there is room.
func (r *replays) startWaiting(ctx actor.Context) {
	for len(r.waiting) > 0 && len(r.l.flights) < r.l.capacity() {
		o := r.waiting[0]
		r.waiting = r.waiting[1:]
		r.start(ctx, o)
	}
}

// appendNext appends the flight's first waiting replay's ReplayRequested,
// unless the stream already holds it (a retried command, a recovery
// resumed after a restart): that one is answered at once.
func (r *replays) appendNext(ctx actor.Context, f *flight) {
	l := r.l
	for len(f.replays) > 0 {
		o := f.replays[0]
		f.replays = f.replays[1:]
		if (o.requestID != "" && slices.Contains(f.d.requested, o.requestID)) || (o.recoveryID != "" && slices.Contains(f.d.requested, o.recoveryID)) {
			if o.sender != nil {
				reply(ctx, o.sender, &internalv1.EndpointReply{Delivery: deliveryView(f, o.view)})
			}
			if o.recoveryID != "" {
				l.recovery.requested(ctx, o.recoveryID, true)
			}
			continue
		}
		f.asking = o
		l.record(ctx, f, &hooklinev1.ReplayRequested{
			TenantId: f.item.TenantID, EndpointId: l.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
			RecoveryId: o.recoveryID, IssuedBy: o.by, At: timestamppb.New(l.cfg.Now()), RequestId: o.requestID,
			OrderingKey: f.item.OrderingKey, Sequence: f.d.ord.sent,
		})
		return
	}
	// Every order was in the stream already.
	l.settle(ctx, f)
	l.pump(ctx)
}

// recorded answers the replay whose ReplayRequested is durable, and lines
// up its manual attempt.
func (r *replays) recorded(ctx actor.Context, f *flight) {
	l := r.l
	if o := f.asking; o != nil {
		f.asking = nil
		if o.sender != nil {
			reply(ctx, o.sender, &internalv1.EndpointReply{Delivery: deliveryView(f, o.view)})
		}
		if o.recoveryID != "" {
			l.recovery.requested(ctx, o.recoveryID, true)
		}
	}
	if len(f.replays) > 0 {
		r.appendNext(ctx, f)
		return
	}
	l.settle(ctx, f)
	l.pump(ctx)
}

// abandon answers a replay that will not happen. ctx may be nil only when
// no order has a sender.
func (r *replays) abandon(ctx actor.Context, o *replayOrder, code internalv1.GrainError_Code, msg string) {
	if o.sender != nil {
		reply(ctx, o.sender, errReplyOf(code, msg))
	}
	if o.recoveryID != "" {
		r.l.recovery.requested(ctx, o.recoveryID, false)
	}
}

// abandonAll answers every replay and skip waiting in the flights and in
// the queue; the grain is stopping.
func (r *replays) abandonAll(ctx actor.Context, e *internalv1.GrainError) {
	l := r.l
	answer := func(o *replayOrder) {
		if o != nil && o.sender != nil {
			reply(ctx, o.sender, &internalv1.EndpointReply{Error: e})
		}
	}
	for _, f := range l.flights {
		answer(f.asking)
		for _, o := range f.replays {
			answer(o)
		}
		if f.skipping != nil && f.skipping.sender != nil {
			reply(ctx, f.skipping.sender, &internalv1.EndpointReply{Error: e})
		}
		f.asking, f.replays, f.skipping = nil, nil, nil
	}
	for _, o := range r.waiting {
		answer(o)
	}
	r.waiting = nil
	l.skips.refuseWaiting(ctx, e)
}

// deliveryView is the delivery as a replay answers it: pending, with the
// attempts recorded so far.
func deliveryView(f *flight, d history.Delivery) *controlv1.Delivery {
	v := &controlv1.Delivery{
		DeliveryId: f.item.DeliveryID, TenantId: f.item.TenantID, EndpointId: f.item.EndpointID, EventId: f.item.EventID,
		EventType: f.eventType(), Status: history.Pending.String(), AttemptCount: f.d.attempts,
		LastHttpStatus: d.LastHTTPStatus,
	}
	if !d.PlannedAt.IsZero() {
		v.PlannedAt = timestamppb.New(d.PlannedAt)
	}
	return v
}
