package endpoint

import (
	"context"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// handleReplay checks a ReplayDeliveryRequest and starts the replay.
func (g *grain) handleReplay(ctx actor.Context, r *request) {
	rq, tenantID := r.Cmd.GetReplay(), r.Cmd.GetTenantId()
	e := g.checkOwn(tenantID, rq.GetTenantId(), "")
	switch {
	case e != nil:
	case rq.GetDeliveryId() == "":
		e = command.Invalid("delivery_id", "is required: name the delivery to replay")
	case g.state.Status != controlv1.Endpoint_STATUS_ACTIVE:
		e = command.FailedPrecondition("", "endpoint %s is %s: resume it before replaying its deliveries", g.id, statusWord(g.state.Status))
	}
	if e != nil {
		refuse(ctx, r.Sender, e)
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
			reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot read the delivery's history; retry"))
			return
		}
		d, ok := res.(history.Delivery)
		if !ok || d.EndpointID != g.id || d.TenantID != tenantID {
			refuse(ctx, r.Sender, command.NotFound("delivery_id", "delivery %q not found", id))
			return
		}
		g.loop.replays.start(ctx, &replayOrder{sender: r.Sender, by: r.Cmd.GetIssuedBy(), requestID: r.Cmd.GetRequestId(), view: d})
	})
}
