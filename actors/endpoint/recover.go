package endpoint

import (
	"context"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Bulk recovery.
//
// RecoverEndpointRequest (since, until, a filter) starts a background job
// and answers with its Recovery (recovery_id "rcv_…"): RecoveryStarted on
// the endpoint stream, after the exact list of deliveries it replays was
// recorded (window.go: the list, the dry run, the digest). An endpoint runs
// one recovery at a time: another request while one runs is refused
// (FAILED_PRECONDITION, naming it); a dry run is always answered. The job
// replays each listed delivery exactly as a replay command would
// (ReplayRequested carrying the recovery_id, then a manual attempt through
// the same limits), a page at a time. Once every delivery of a page has
// its ReplayRequested, RecoveryProgressed records where the next page
// starts and the counts; after the last page, RecoveryFinished.
//
// The job is durable: a new activation of the grain (after a restart, a
// failover, a passivation) resumes it from its last progress. A delivery of
// the page being replayed when the grain stopped is not replayed twice:
// its stream holds a ReplayRequested of this recovery. A recovery recorded
// before lists (no digest on its RecoveryStarted) resumes as it was
// started: listing its window's failed deliveries page by page from the
// history projection, from its last cursor. The endpoint keeps
// its last MaxRecoveries recoveries, listed newest first by
// ListRecoveriesRequest; GetRecoveryRequest reports one. A recovery of an
// endpoint that is paused, disabled or deleted while it runs ends there
// (REASON_ENDPOINT_NOT_ACTIVE).

// MaxRecoveries is how many recoveries an endpoint remembers (the one
// running, if any, and the last ones finished).
const MaxRecoveries = 20

// listRetryDelay is how long a recovery waits before listing a page again
// when the history cannot be read.
const listRetryDelay = 5 * time.Second

// Recovery is a bulk recovery as the endpoint stream describes it.
type Recovery struct {
	ID           string
	Since, Until time.Time
	IssuedBy     *hooklinev1.Actor
	StartedAt    time.Time
	// Cursor is where the listing resumes; Found and Requested count the
	// deliveries listed and replayed before it.
	Cursor           string
	Found, Requested int64
	// Statuses and EventTypes are the window's filter (Statuses empty in a
	// recovery recorded before filters: failed). Deliveries and Digest
	// describe its recorded list (Digest empty in a recovery recorded
	// before lists), and Next is the index in it where the run resumes.
	Statuses, EventTypes []string
	Deliveries           int64
	Digest               string
	Next                 int64
	// Ended is set by RecoveryFinished, with its reason and time.
	Ended      hooklinev1.RecoveryFinished_Reason
	FinishedAt time.Time
}

// Running reports whether the recovery has not ended.
func (r Recovery) Running() bool { return r.Ended == hooklinev1.RecoveryFinished_REASON_UNSPECIFIED }

// applyRecovery folds a recovery event into s.
func (s *State) applyRecovery(msg proto.Message) {
	switch e := msg.(type) {
	case *hooklinev1.RecoveryStarted:
		s.Recoveries = append(s.Recoveries, Recovery{
			ID: e.GetRecoveryId(), Since: asTime(e.GetSince()), Until: asTime(e.GetUntil()),
			IssuedBy: e.GetIssuedBy(), StartedAt: asTime(e.GetAt()),
			Statuses: e.GetStatuses(), EventTypes: e.GetEventTypes(), Deliveries: e.GetDeliveries(), Digest: e.GetDigest(),
			Found: e.GetDeliveries(),
		})
		if n := len(s.Recoveries) - MaxRecoveries; n > 0 {
			s.Recoveries = slices.Delete(s.Recoveries, 0, n)
		}
	case *hooklinev1.RecoveryProgressed:
		if r := s.recovery(e.GetRecoveryId()); r != nil {
			r.Cursor, r.Found, r.Requested, r.Next = e.GetCursor(), e.GetFound(), e.GetRequested(), e.GetNext()
		}
	case *hooklinev1.RecoveryFinished:
		if r := s.recovery(e.GetRecoveryId()); r != nil {
			r.Ended, r.FinishedAt, r.Found, r.Requested = e.GetReason(), asTime(e.GetAt()), e.GetFound(), e.GetRequested()
		}
	}
}

func (s *State) recovery(id string) *Recovery {
	for i := range s.Recoveries {
		if s.Recoveries[i].ID == id {
			return &s.Recoveries[i]
		}
	}
	return nil
}

// Recovery returns the recovery id, if the endpoint remembers it.
func (s *State) Recovery(id string) (Recovery, bool) {
	if r := s.recovery(id); r != nil {
		return *r, true
	}
	return Recovery{}, false
}

// RunningRecovery returns the recovery that has not ended, if any.
func (s *State) RunningRecovery() (Recovery, bool) {
	for _, r := range s.Recoveries {
		if r.Running() {
			return r, true
		}
	}
	return Recovery{}, false
}

// recoveryRun is the running recovery as this activation carries it out.
type recoveryRun struct {
	id               string
	tenantID         string
	by               *hooklinev1.Actor
	since, until     time.Time
	cursor           string // of the page being replayed
	next             string // the cursor after it
	listing          bool
	outstanding      int   // replays of the page whose ReplayRequested is not durable yet
	found, requested int64 // so far, this page's included
	replayed         int64 // manual attempts recorded by this activation
	// A listed recovery (window.go) replays list[pos:end] as its page;
	// loading while it reads list back from its stream.
	listed   bool
	loading  bool
	list     []string
	pos, end int64
}

type recoverPage struct {
	id   string
	page history.Page
	err  error
}

// handleRecover checks a RecoverEndpointRequest, then lists its window
// (window.go): the manifest of a dry run, or the job started.
func (g *grain) handleRecover(ctx actor.Context, r *request) {
	rq := r.Cmd.GetRecover()
	if e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: e.Proto()})
		return
	}
	switch {
	case rq.GetSince() == nil || rq.GetUntil() == nil:
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("since", "since and until are required: give the range of planned times to recover").Proto()})
		return
	case !rq.GetSince().AsTime().Before(rq.GetUntil().AsTime()):
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("until", "must be after since").Proto()})
		return
	}
	w, e := windowOf(g.state.TenantID, g.id, rq)
	if e == nil && !rq.GetDryRun() {
		e = g.canRecover()
	}
	if e != nil {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: e.Proto()})
		return
	}
	g.handleWindow(ctx, r, w)
}

// handleGetRecovery answers a recovery's progress.
func (g *grain) handleGetRecovery(ctx actor.Context, r *request) {
	rq := r.Cmd.GetGetRecovery()
	if e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: e.Proto()})
		return
	}
	rec, ok := g.state.Recovery(rq.GetRecoveryId())
	if !ok {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.NotFound("recovery_id", "recovery %q not found (an endpoint keeps its last %d recoveries)", rq.GetRecoveryId(), MaxRecoveries).Proto()})
		return
	}
	g.reply(ctx, r.Sender, &internalv1.EndpointReply{Recovery: g.recoveryView(rec)})
}

// handleListRecoveries answers the recoveries the endpoint remembers,
// newest first.
func (g *grain) handleListRecoveries(ctx actor.Context, r *request) {
	rq := r.Cmd.GetListRecoveries()
	if e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId()); e != nil {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: e.Proto()})
		return
	}
	rep := &internalv1.EndpointReply{}
	for i := len(g.state.Recoveries) - 1; i >= 0; i-- {
		rep.Recoveries = append(rep.Recoveries, g.recoveryView(g.state.Recoveries[i]))
	}
	g.reply(ctx, r.Sender, rep)
}

// recoveryView is a recovery as the control API shows it: as recorded, with
// the live counts of the page under way when this activation runs it.
func (g *grain) recoveryView(rec Recovery) *controlv1.Recovery {
	v := &controlv1.Recovery{
		RecoveryId: rec.ID, EndpointId: g.id, Since: timestamppb.New(rec.Since), Until: timestamppb.New(rec.Until),
		StartedAt: timestamppb.New(rec.StartedAt), Found: rec.Found, Requested: rec.Requested, State: "running",
		Statuses: rec.Statuses, EventTypes: rec.EventTypes,
	}
	if len(v.Statuses) == 0 {
		v.Statuses = []string{history.Failed.String()}
	}
	if rec.Digest != "" {
		v.Manifest = g.manifest(rec.Deliveries, rec.Digest, nil)
	}
	if run := g.runOf(rec.ID); run != nil {
		v.Found, v.Requested, v.Replayed = run.found, run.requested, run.replayed
	}
	if !rec.Running() {
		v.Done, v.FinishedAt = true, timestamppb.New(rec.FinishedAt)
		v.State = "done"
		if rec.Ended == hooklinev1.RecoveryFinished_REASON_ENDPOINT_NOT_ACTIVE {
			v.State = "endpoint_not_active"
		}
		if run := g.loop.finished; run != nil && run.id == rec.ID {
			v.Replayed = run.replayed
		}
	}
	return v
}

func (g *grain) runOf(id string) *recoveryRun {
	if g.loop != nil && g.loop.recovery != nil && g.loop.recovery.id == id {
		return g.loop.recovery
	}
	return nil
}

// checkOwn answers NOT_FOUND unless the endpoint is live and the caller's.
func (g *grain) checkOwn(tenantID, reqTenant, reqEndpoint string) *command.Error {
	switch {
	case tenantID == "":
		return command.Invalid("tenant_id", "is required: the command must name the caller's tenant")
	case (reqTenant != "" && reqTenant != tenantID) || !g.state.Live() || g.state.TenantID != tenantID:
		return command.NotFound("endpoint_id", "endpoint %q not found", g.id)
	case reqEndpoint != "" && reqEndpoint != g.id:
		return command.Invalid("endpoint_id", "%q does not match the endpoint %q the command was sent to", reqEndpoint, g.id)
	}
	return nil
}

// resumeRecovery carries out the running recovery the state records, if
// this activation is not doing so yet: after RecoveryStarted, and on
// activation (a restart resumes it from its cursor).
func (g *grain) resumeRecovery(ctx actor.Context) {
	l := g.loop
	rec, ok := g.state.RunningRecovery()
	if !ok || l.recovery != nil || !l.caughtUp {
		return
	}
	if rec.Digest != "" {
		g.runList(ctx, rec, nil)
		return
	}
	l.recovery = &recoveryRun{
		id: rec.ID, tenantID: g.state.TenantID, by: rec.IssuedBy, since: rec.Since, until: rec.Until,
		cursor: rec.Cursor, found: rec.Found, requested: rec.Requested,
	}
	g.listPage(ctx, 0)
}

// listPage reads the next page of the running recovery's failed
// deliveries, off the mailbox, after delay.
func (g *grain) listPage(ctx actor.Context, delay time.Duration) {
	run := g.loop.recovery
	run.listing = true
	hist := g.cfg.History
	q := history.Query{
		TenantID: run.tenantID, EndpointID: g.id, Status: history.Failed,
		Since: run.since, Until: run.until, Limit: g.cfg.PullLimit, Cursor: run.cursor,
	}
	id := run.id
	g.async(ctx, 0, func(c context.Context) any {
		if delay > 0 {
			t := time.NewTimer(delay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-c.Done():
				return &recoverPage{id: id, err: c.Err()}
			}
		}
		p, err := hist.Search(q)
		return &recoverPage{id: id, page: p, err: err}
	})
}

func (g *grain) onRecoverPage(ctx actor.Context, m *recoverPage) {
	run := g.loop.recovery
	if run == nil || run.id != m.id {
		return
	}
	run.listing = false
	if m.err != nil {
		g.log.Warn("recovery cannot list failed deliveries; trying again", "recovery_id", m.id, "error", m.err)
		g.listPage(ctx, listRetryDelay)
		return
	}
	run.next = m.page.Next
	run.found += int64(len(m.page.Deliveries))
	run.outstanding = len(m.page.Deliveries)
	for _, d := range m.page.Deliveries {
		g.replay(ctx, &replayOrder{by: run.by, recoveryID: run.id, view: d})
	}
	g.pageDone(ctx)
	g.pump(ctx)
}

// replayRequested counts one replay of the running recovery as requested
// (its ReplayRequested is durable, now or before a restart) or abandoned.
func (g *grain) replayRequested(ctx actor.Context, recoveryID string, requested bool) {
	run := g.runOf(recoveryID)
	if run == nil {
		return
	}
	run.outstanding--
	if requested {
		run.requested++
	}
	g.pageDone(ctx)
}

// pageDone records the recovery's progress once every delivery of the page
// has its ReplayRequested, and lists the next page or finishes.
func (g *grain) pageDone(ctx actor.Context) {
	run := g.loop.recovery
	if run == nil || run.listing || run.outstanding > 0 {
		return
	}
	now := timestamppb.New(g.cfg.Now())
	if run.listed {
		if run.loading {
			return
		}
		g.queueOwn(&hooklinev1.RecoveryProgressed{
			TenantId: run.tenantID, EndpointId: g.id, RecoveryId: run.id, Next: run.end,
			Found: run.found, Requested: run.requested, At: now,
		})
		if run.end >= int64(len(run.list)) {
			g.finishRecovery(hooklinev1.RecoveryFinished_REASON_DONE)
			return
		}
		run.pos = run.end
		g.nextBatch(ctx, 0)
		return
	}
	g.queueOwn(&hooklinev1.RecoveryProgressed{
		TenantId: run.tenantID, EndpointId: g.id, RecoveryId: run.id, Cursor: run.next,
		Found: run.found, Requested: run.requested, At: now,
	})
	if run.next == "" {
		g.finishRecovery(hooklinev1.RecoveryFinished_REASON_DONE)
		return
	}
	run.cursor = run.next
	g.listPage(ctx, 0)
}

// finishRecovery ends the running recovery. Its replays already requested
// still get their attempts.
func (g *grain) finishRecovery(reason hooklinev1.RecoveryFinished_Reason) {
	l := g.loop
	run := l.recovery
	g.queueOwn(&hooklinev1.RecoveryFinished{
		TenantId: run.tenantID, EndpointId: g.id, RecoveryId: run.id, Reason: reason,
		Found: run.found, Requested: run.requested, At: timestamppb.New(g.cfg.Now()),
	})
	g.log.Info("recovery finished", "recovery_id", run.id, "reason", reason.String(), "found", run.found, "requested", run.requested)
	l.recovery, l.finished = nil, run
	l.replays = slices.DeleteFunc(l.replays, func(o *replayOrder) bool { return o.recoveryID == run.id && o.sender == nil })
}

// recoveryProgress counts one manual attempt of a recovery as recorded.
func (g *grain) recoveryProgress(recoveryID string) {
	if run := g.runOf(recoveryID); run != nil {
		run.replayed++
	} else if run := g.loop.finished; run != nil && run.id == recoveryID {
		run.replayed++
	}
}
