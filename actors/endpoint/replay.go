package endpoint

import (
	"context"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Manual replay.
//
// ReplayDeliveryRequest names a delivery of the caller's tenant. The grain
// finds it in the history projection and answers NOT_FOUND unless it
// belongs to this endpoint and tenant (and the endpoint is live), and
// FAILED_PRECONDITION while the endpoint is paused or disabled. It then
// appends ReplayRequested (issued_by: the caller) to the delivery stream
// and answers as soon as that is durable, with the delivery as it stands:
// the request is a durable intent, so a crash after the answer still gets
// its attempt from the next activation, which finds the pending replay in
// the stream. The manual attempt follows through the delivery loop like
// any other, paced by the same limits (in-flight, lease, breaker, token
// bucket, dispatcher slot as a retry), signed with the live secrets as
// they are now, and marked manual; it counts in the attempt numbers. A
// failed manual attempt does not start automatic retries: a delivery that
// had ended stays failed, and one whose automatic retries were pending
// keeps their schedule (see nextAttempt). A delivery the grain holds (in
// flight) is replayed once its current outcome is durable.

// replayOrder is one replay to carry out: from a command (sender set) or
// from a bulk recovery (recoveryID set).
type replayOrder struct {
	sender     *actor.PID
	by         *hooklinev1.Actor
	recoveryID string
	view       history.Delivery
}

// handleReplay checks a ReplayDeliveryRequest and starts the replay.
func (g *grain) handleReplay(ctx actor.Context, r *request) {
	rq := r.cmd.GetReplay()
	tenantID := r.cmd.GetTenantId()
	switch {
	case tenantID == "":
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: invalid("tenant_id", "is required: the command must name the caller's tenant").Proto()})
		return
	case (rq.GetTenantId() != "" && rq.GetTenantId() != tenantID) || !g.state.Live() || g.state.TenantID != tenantID:
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: notFound("endpoint_id", "endpoint %q not found", g.id).Proto()})
		return
	case rq.GetDeliveryId() == "":
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: invalid("delivery_id", "is required: name the delivery to replay").Proto()})
		return
	case g.state.Status != controlv1.Endpoint_STATUS_ACTIVE:
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: failedPrecondition("", "endpoint %s is %s: resume it before replaying its deliveries", g.id, statusWord(g.state.Status)).Proto()})
		return
	}
	hist, id := g.cfg.History, rq.GetDeliveryId()
	g.current = r
	g.io(ctx, func(context.Context) (any, error) {
		d, ok, err := hist.Get(tenantID, id)
		if err != nil || !ok {
			return nil, err
		}
		return d, nil
	}, func(res any, err error) {
		g.current = nil
		if err != nil {
			g.log.Error("endpoint grain cannot read the history", "delivery_id", id, "err", err)
			g.reply(ctx, r.sender, errReply(controlv1.GrainError_CODE_UNAVAILABLE, "cannot read the delivery's history; retry"))
			return
		}
		d, ok := res.(history.Delivery)
		if !ok || d.EndpointID != g.id || d.TenantID != tenantID {
			g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: notFound("delivery_id", "delivery %q not found", id).Proto()})
			return
		}
		g.replay(ctx, &replayOrder{sender: r.sender, by: r.cmd.GetIssuedBy(), view: d})
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
// is under way.
func (g *grain) replay(ctx actor.Context, o *replayOrder) {
	e := g.eng
	d := o.view
	f := e.flights[d.ID]
	if f == nil {
		f = &flight{item: due.Item{
			DeliveryID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType, EndpointID: d.EndpointID,
			ConfigVersion: d.ConfigVersion, Class: due.ClassRetry, Manual: true, DueAt: g.cfg.Now(),
			PlannedAt: d.PlannedAt, ExpiresAt: d.ExpiresAt,
		}}
		f.replays = []*replayOrder{o}
		e.flights[d.ID] = f
		g.read(ctx, f)
		return
	}
	f.replays = append(f.replays, o)
	if f.stage == stageReady {
		e.ready = slices.DeleteFunc(e.ready, func(x *flight) bool { return x == f })
		g.appendReplay(ctx, f)
	}
	// Otherwise onRead or onRecorded carries it out.
}

// appendReplay appends the first waiting replay's ReplayRequested.
func (g *grain) appendReplay(ctx actor.Context, f *flight) {
	o := f.replays[0]
	f.replays = f.replays[1:]
	f.asking = o
	g.record(ctx, f, &hooklinev1.ReplayRequested{
		TenantId: f.item.TenantID, EndpointId: g.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
		RecoveryId: o.recoveryID, IssuedBy: o.by, At: timestamppb.New(g.cfg.Now()),
	})
}

// replayed answers the replay whose ReplayRequested is durable, and lines
// up its manual attempt.
func (g *grain) replayed(ctx actor.Context, f *flight) {
	if o := f.asking; o != nil {
		f.asking = nil
		if o.sender != nil {
			g.reply(ctx, o.sender, &controlv1.EndpointReply{Delivery: deliveryView(f, o.view)})
		}
	}
	g.settle(ctx, f)
}

// abandon answers a replay that will not happen.
func (g *grain) abandon(ctx actor.Context, o *replayOrder, code controlv1.GrainError_Code, msg string) {
	if o.sender != nil {
		g.reply(ctx, o.sender, errReply(code, msg))
	}
	if o.recoveryID != "" {
		g.recoveryProgress(ctx, o.recoveryID, false)
	}
}

// abandonAll answers every replay waiting in the flights; the grain is
// stopping.
func (g *grain) abandonAll(ctx actor.Context, code controlv1.GrainError_Code, msg string) {
	if g.eng == nil {
		return
	}
	for _, f := range g.eng.flights {
		if f.asking != nil && f.asking.sender != nil {
			g.reply(ctx, f.asking.sender, errReply(code, msg))
		}
		for _, o := range f.replays {
			if o.sender != nil {
				g.reply(ctx, o.sender, errReply(code, msg))
			}
		}
		f.asking, f.replays = nil, nil
	}
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
