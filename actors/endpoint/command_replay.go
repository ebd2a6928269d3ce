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
	rq := r.Cmd.GetReplay()
	tenantID := r.Cmd.GetTenantId()
	switch {
	case tenantID == "":
		reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("tenant_id", "is required: the command must name the caller's tenant").Proto()})
		return
	case (rq.GetTenantId() != "" && rq.GetTenantId() != tenantID) || !g.state.Live() || g.state.TenantID != tenantID:
		reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.NotFound("endpoint_id", "endpoint %q not found", g.id).Proto()})
		return
	case rq.GetDeliveryId() == "":
		reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("delivery_id", "is required: name the delivery to replay").Proto()})
		return
	case g.state.Status != controlv1.Endpoint_STATUS_ACTIVE:
		reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.FailedPrecondition("", "endpoint %s is %s: resume it before replaying its deliveries", g.id, statusWord(g.state.Status)).Proto()})
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
			reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.NotFound("delivery_id", "delivery %q not found", id).Proto()})
			return
		}
		g.loop.replay(ctx, &replayOrder{sender: r.Sender, by: r.Cmd.GetIssuedBy(), requestID: r.Cmd.GetRequestId(), view: d})
	})
}
