package endpoint

import (
	"context"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Manual replay.
//
// ReplayDeliveryRequest names a delivery of the caller's tenant. The grain
// finds it in the history projection and answers NOT_FOUND unless it
// belongs to this endpoint and tenant (and the endpoint is live), and
// FAILED_PRECONDITION while the endpoint is paused or disabled. It then
// appends ReplayRequested (issued_by: the caller, request_id: the
// command's) to the delivery stream and answers as soon as that is
// durable, with the delivery as it stands: the request is a durable
// intent, so a crash after the answer still gets its attempt from the next
// activation, which finds the pending replay in the stream. A retried
// command (same request id) whose ReplayRequested is already in the stream
// is answered without another. The manual attempt follows through the
// delivery loop like any other, paced by the same limits (in-flight, lease,
// breaker, token bucket, dispatcher slot as a retry), signed with the live
// secrets as they are now, and marked manual; it counts in the attempt
// numbers. A failed manual attempt does not start automatic retries: a
// delivery that had ended stays failed, and one whose automatic retries
// were pending keeps their schedule (see nextAttempt). A delivery the grain
// holds (in flight) is replayed once its current outcome is durable.
//
// Replays take room among the grain's flights like pulled deliveries: a
// replay command that finds the grain holding as many as it may is
// answered UNAVAILABLE (retry later); a recovery's replays wait for room
// (a page of them at most).

// replayOrder is one replay to carry out: from a command (sender set) or
// from a bulk recovery (recoveryID set).
type replayOrder struct {
	sender     *actor.PID
	by         *hooklinev1.Actor
	requestID  string
	recoveryID string
	view       history.Delivery
}

// handleReplay checks a ReplayDeliveryRequest and starts the replay.
func (g *grain) handleReplay(ctx actor.Context, r *request) {
	rq := r.Cmd.GetReplay()
	tenantID := r.Cmd.GetTenantId()
	switch {
	case tenantID == "":
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("tenant_id", "is required: the command must name the caller's tenant").Proto()})
		return
	case (rq.GetTenantId() != "" && rq.GetTenantId() != tenantID) || !g.state.Live() || g.state.TenantID != tenantID:
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.NotFound("endpoint_id", "endpoint %q not found", g.id).Proto()})
		return
	case rq.GetDeliveryId() == "":
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("delivery_id", "is required: name the delivery to replay").Proto()})
		return
	case g.state.Status != controlv1.Endpoint_STATUS_ACTIVE:
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.FailedPrecondition("", "endpoint %s is %s: resume it before replaying its deliveries", g.id, statusWord(g.state.Status)).Proto()})
		return
	}
	hist, id := g.cfg.History, rq.GetDeliveryId()
	g.core.IO(ctx, r, func(context.Context) (any, error) {
		d, ok, err := hist.Get(tenantID, id)
		if err != nil || !ok {
			return nil, err
		}
		return d, nil
	}, func(res any, err error) {
		if err != nil {
			g.log.Error("endpoint grain cannot read the history", "delivery_id", id, "error", err)
			g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot read the delivery's history; retry"))
			return
		}
		d, ok := res.(history.Delivery)
		if !ok || d.EndpointID != g.id || d.TenantID != tenantID {
			g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.NotFound("delivery_id", "delivery %q not found", id).Proto()})
			return
		}
		g.replay(ctx, &replayOrder{sender: r.Sender, by: r.Cmd.GetIssuedBy(), requestID: r.Cmd.GetRequestId(), view: d})
	})
}

func statusWord(s controlv1.Endpoint_Status) string {
	switch s {
	case controlv1.Endpoint_STATUS_PAUSED:
		return "paused"
	case controlv1.Endpoint_STATUS_DISABLED:
		return "disabled"
	}
	return s.String()
}

// replay holds the delivery (reading its streams first if it was not held)
// and appends its ReplayRequested as soon as no other append to its stream
// is under way. Without room among the flights, the order waits.
func (g *grain) replay(ctx actor.Context, o *replayOrder) {
	l := g.loop
	d := o.view
	f := l.flights[d.ID]
	if f == nil {
		if len(l.flights) >= g.capacity() {
			if o.sender != nil {
				g.abandon(ctx, o, internalv1.GrainError_CODE_UNAVAILABLE, "the endpoint holds as many deliveries as it may; retry the replay later")
				return
			}
			l.replays = append(l.replays, o) // a recovery's: at most a page
			return
		}
		f = &flight{item: due.Item{
			DeliveryID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType, EndpointID: d.EndpointID,
			ConfigVersion: d.ConfigVersion, Class: due.ClassRetry, Manual: true, DueAt: g.cfg.Now(),
			PlannedAt: d.PlannedAt, ExpiresAt: d.ExpiresAt,
		}}
		f.replays = []*replayOrder{o}
		l.flights[d.ID] = f
		g.read(ctx, f)
		return
	}
	f.replays = append(f.replays, o)
	if f.stage == stageReady {
		l.ready = slices.DeleteFunc(l.ready, func(x *flight) bool { return x == f })
		g.appendReplay(ctx, f)
	}
	// Otherwise onRead or onRecorded carries it out.
}

// startReplays starts the waiting replay orders while there is room.
func (g *grain) startReplays(ctx actor.Context) {
	l := g.loop
	for len(l.replays) > 0 && len(l.flights) < g.capacity() {
		o := l.replays[0]
		l.replays = l.replays[1:]
		g.replay(ctx, o)
	}
}

// appendReplay appends the first waiting replay's ReplayRequested, unless
// the stream already holds it (a retried command, a recovery resumed after
// a restart): that one is answered at once.
func (g *grain) appendReplay(ctx actor.Context, f *flight) {
	for len(f.replays) > 0 {
		o := f.replays[0]
		f.replays = f.replays[1:]
		if (o.requestID != "" && slices.Contains(f.d.requested, o.requestID)) || (o.recoveryID != "" && slices.Contains(f.d.requested, o.recoveryID)) {
			if o.sender != nil {
				g.reply(ctx, o.sender, &internalv1.EndpointReply{Delivery: deliveryView(f, o.view)})
			}
			if o.recoveryID != "" {
				g.replayRequested(ctx, o.recoveryID, true)
			}
			continue
		}
		f.asking = o
		g.record(ctx, f, &hooklinev1.ReplayRequested{
			TenantId: f.item.TenantID, EndpointId: g.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
			RecoveryId: o.recoveryID, IssuedBy: o.by, At: timestamppb.New(g.cfg.Now()), RequestId: o.requestID,
		})
		return
	}
	// Every order was in the stream already.
	g.settle(ctx, f)
	g.pump(ctx)
}

// replayed answers the replay whose ReplayRequested is durable, and lines
// up its manual attempt.
func (g *grain) replayed(ctx actor.Context, f *flight) {
	if o := f.asking; o != nil {
		f.asking = nil
		if o.sender != nil {
			g.reply(ctx, o.sender, &internalv1.EndpointReply{Delivery: deliveryView(f, o.view)})
		}
		if o.recoveryID != "" {
			g.replayRequested(ctx, o.recoveryID, true)
		}
	}
	if len(f.replays) > 0 {
		g.appendReplay(ctx, f)
		return
	}
	g.settle(ctx, f)
	g.pump(ctx)
}

// abandon answers a replay that will not happen. ctx may be nil only when
// no order has a sender.
func (g *grain) abandon(ctx actor.Context, o *replayOrder, code internalv1.GrainError_Code, msg string) {
	if o.sender != nil {
		g.reply(ctx, o.sender, errReplyOf(code, msg))
	}
	if o.recoveryID != "" {
		g.replayRequested(ctx, o.recoveryID, false)
	}
}

// abandonAll answers every replay waiting in the flights and in the queue;
// the grain is stopping.
func (g *grain) abandonAll(ctx actor.Context, e *internalv1.GrainError) {
	if g.loop == nil {
		return
	}
	answer := func(o *replayOrder) {
		if o != nil && o.sender != nil {
			g.reply(ctx, o.sender, &internalv1.EndpointReply{Error: e})
		}
	}
	for _, f := range g.loop.flights {
		answer(f.asking)
		for _, o := range f.replays {
			answer(o)
		}
		f.asking, f.replays = nil, nil
	}
	for _, o := range g.loop.replays {
		answer(o)
	}
	g.loop.replays = nil
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
