package endpoint

import (
	"context"
	"encoding/hex"
	"io"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Bulk recovery.
//
// RecoverEndpointRequest (since, until) starts a background job in the
// grain and answers at once with its Recovery (recovery_id "rcv_…"). The
// job lists the endpoint's failed deliveries planned in [since, until) from
// the history projection, a page at a time, and replays each one exactly
// as a replay command would (ReplayRequested carrying the recovery_id, then
// a manual attempt through the same limits). It keeps at most the
// endpoint's in-flight limit of its replays outstanding, and reads the next
// page when they drain. GetRecoveryRequest reports found (deliveries
// listed), replayed (manual attempts recorded) and done.
//
// Jobs live in the grain's memory: a restart (deactivation, failover) loses
// the job's progress and the rest of its listing; the replays already
// requested are durable and still get their attempts. Run the recovery
// again to finish: deliveries that succeeded meanwhile are no longer failed
// and are not listed again.

// recovery is one bulk recovery job.
type recovery struct {
	view        *controlv1.Recovery
	tenantID    string
	by          *hooklinev1.Actor
	cursor      string
	listing     bool
	exhausted   bool
	outstanding int
}

type recoverPage struct {
	id   string
	page history.Page
	err  error
}

// handleRecover checks a RecoverEndpointRequest and starts the job.
func (g *grain) handleRecover(ctx actor.Context, r *request) {
	rq := r.cmd.GetRecover()
	if e := g.checkOwn(r.cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: e.Proto()})
		return
	}
	since, until := rq.GetSince().AsTime(), rq.GetUntil().AsTime()
	switch {
	case rq.GetSince() == nil || rq.GetUntil() == nil:
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: invalid("since", "since and until are required: give the range of planned times to recover").Proto()})
		return
	case !since.Before(until):
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: invalid("until", "must be after since").Proto()})
		return
	case g.state.Status != controlv1.Endpoint_STATUS_ACTIVE:
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: failedPrecondition("", "endpoint %s is %s: resume it before recovering its deliveries", g.id, statusWord(g.state.Status)).Proto()})
		return
	}
	var b [8]byte
	if _, err := io.ReadFull(g.cfg.Rand, b[:]); err != nil {
		g.reply(ctx, r.sender, errReply(controlv1.GrainError_CODE_INTERNAL, "cannot draw a recovery id"))
		return
	}
	now := g.cfg.Now()
	rec := &recovery{
		view: &controlv1.Recovery{
			RecoveryId: "rcv_" + hex.EncodeToString(b[:]), EndpointId: g.id,
			Since: rq.GetSince(), Until: rq.GetUntil(), StartedAt: timestamppb.New(now),
		},
		tenantID: g.state.TenantID, by: r.cmd.GetIssuedBy(),
	}
	g.eng.recoveries[rec.view.GetRecoveryId()] = rec
	g.log.Info("recovery started", "recovery_id", rec.view.GetRecoveryId(), "since", since, "until", until)
	g.reply(ctx, r.sender, &controlv1.EndpointReply{Recovery: proto.CloneOf(rec.view)})
	g.recoverNext(ctx, rec)
}

// handleGetRecovery answers a recovery's progress.
func (g *grain) handleGetRecovery(ctx actor.Context, r *request) {
	rq := r.cmd.GetGetRecovery()
	if e := g.checkOwn(r.cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: e.Proto()})
		return
	}
	rec := g.eng.recoveries[rq.GetRecoveryId()]
	if rec == nil {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: notFound("recovery_id", "recovery %q not found (recoveries are kept in memory: a restart of the endpoint grain forgets them)", rq.GetRecoveryId()).Proto()})
		return
	}
	g.reply(ctx, r.sender, &controlv1.EndpointReply{Recovery: proto.CloneOf(rec.view)})
}

// checkOwn answers NOT_FOUND unless the endpoint is live and the caller's.
func (g *grain) checkOwn(tenantID, reqTenant, reqEndpoint string) *Error {
	switch {
	case tenantID == "":
		return invalid("tenant_id", "is required: the command must name the caller's tenant")
	case (reqTenant != "" && reqTenant != tenantID) || !g.state.Live() || g.state.TenantID != tenantID:
		return notFound("endpoint_id", "endpoint %q not found", g.id)
	case reqEndpoint != "" && reqEndpoint != g.id:
		return invalid("endpoint_id", "%q does not match the endpoint %q the command was sent to", reqEndpoint, g.id)
	}
	return nil
}

// recoverNext reads the next page when the job's replays have drained.
func (g *grain) recoverNext(ctx actor.Context, rec *recovery) {
	if rec.listing || rec.view.GetDone() {
		return
	}
	if rec.exhausted {
		if rec.outstanding == 0 {
			rec.view.Done, rec.view.FinishedAt = true, timestamppb.New(g.cfg.Now())
			g.log.Info("recovery done", "recovery_id", rec.view.GetRecoveryId(), "found", rec.view.GetFound(), "replayed", rec.view.GetReplayed())
		}
		return
	}
	limit := g.maxInFlight()
	if rec.outstanding > limit/2 {
		return
	}
	rec.listing = true
	hist, id := g.cfg.History, rec.view.GetRecoveryId()
	q := history.Query{
		TenantID: rec.tenantID, EndpointID: g.id, Status: history.Failed,
		Since: rec.view.GetSince().AsTime(), Until: rec.view.GetUntil().AsTime(), Limit: limit, Cursor: rec.cursor,
	}
	g.async(ctx, g.cfg.IOTimeout, func(context.Context) any {
		p, err := hist.Search(q)
		return &recoverPage{id: id, page: p, err: err}
	})
}

func (g *grain) onRecoverPage(ctx actor.Context, m *recoverPage) {
	rec := g.eng.recoveries[m.id]
	if rec == nil {
		return
	}
	rec.listing = false
	if m.err != nil {
		g.log.Error("recovery cannot list failed deliveries; it ends here", "recovery_id", m.id, "err", m.err)
		rec.exhausted = true
		g.recoverNext(ctx, rec)
		return
	}
	for _, d := range m.page.Deliveries {
		rec.view.Found++
		rec.outstanding++
		g.replay(ctx, &replayOrder{by: rec.by, recoveryID: m.id, view: d})
	}
	rec.cursor = m.page.Next
	rec.exhausted = m.page.Next == ""
	g.recoverNext(ctx, rec)
}

// recoveryProgress counts one replay of a recovery as finished: its manual
// attempt recorded (replayed) or abandoned.
func (g *grain) recoveryProgress(ctx actor.Context, id string, replayed bool) {
	rec := g.eng.recoveries[id]
	if rec == nil {
		return
	}
	rec.outstanding--
	if replayed {
		rec.view.Replayed++
	}
	g.recoverNext(ctx, rec)
}
