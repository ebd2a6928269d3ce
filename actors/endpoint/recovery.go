package endpoint

import (
	"context"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/internal/pause"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// listRetryDelay is how long a recovery waits before listing a page again
// when the history cannot be read.
const listRetryDelay = 5 * time.Second

// recoveryRun is the running recovery as this activation carries it out:
// it replays the recovery's listed deliveries a page at a time, and
// RecoveryProgressed records where a new activation resumes it. (A
// recovery recorded before lists pages through the history instead.)
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
	// A listed recovery (recovery_window.go) replays list[pos:end] as its page;
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

// recoverer carries out the endpoint's bulk recoveries on its loop: the
// one that has not finished (run), a page at a time, and remembers the last
// one it finished (for its count of attempts). A recovery recorded before
// lists pages through the history (listPage); a listed one replays its
// recorded list (recovery_window.go). Owned by the actor, like the loop.
type recoverer struct {
	l *loop
	// run is the recovery this activation is carrying out, if any;
	// finished, the last one it finished.
	run, finished *recoveryRun
}

// runOf returns the run of recovery id if this activation is carrying it
// out; nil if not, and on a nil recoverer (the loop is off).
func (r *recoverer) runOf(id string) *recoveryRun {
	if r != nil && r.run != nil && r.run.id == id {
		return r.run
	}
	return nil
}

// finishedRun returns the run of recovery id if it is the last one this
// activation finished; nil if not, and on a nil recoverer.
func (r *recoverer) finishedRun(id string) *recoveryRun {
	if r != nil && r.finished != nil && r.finished.id == id {
		return r.finished
	}
	return nil
}

// resume carries out the running recovery the state records, if this
// activation is not doing so yet: after RecoveryStarted, and on activation
// (a restart resumes it from its cursor).
func (r *recoverer) resume(ctx actor.Context) {
	l := r.l
	rec, ok := l.state.RunningRecovery()
	if !ok || r.run != nil || !l.caughtUp {
		return
	}
	if rec.Digest != "" {
		r.runList(ctx, rec, nil)
		return
	}
	r.run = &recoveryRun{
		id: rec.ID, tenantID: l.state.TenantID, by: rec.IssuedBy, since: rec.Since, until: rec.Until,
		cursor: rec.Cursor, found: rec.Found, requested: rec.Requested,
	}
	r.listPage(ctx, 0)
}

// listPage reads the next page of the running recovery's failed
// deliveries, off the mailbox, after delay.
func (r *recoverer) listPage(ctx actor.Context, delay time.Duration) {
	l, run := r.l, r.run
	run.listing = true
	hist := l.cfg.History
	q := history.Query{
		TenantID: run.tenantID, EndpointID: l.id, Status: history.Failed,
		Since: run.since, Until: run.until, Limit: l.cfg.PullLimit, Cursor: run.cursor,
	}
	id := run.id
	l.async(ctx, 0, func(c context.Context) any {
		if err := wait(c, delay); err != nil {
			return &recoverPage{id: id, err: err}
		}
		p, err := hist.Search(q)
		return &recoverPage{id: id, page: p, err: err}
	})
}

// onPage replays a page of failed deliveries of a recovery recorded
// before lists, or lists it again after a delay.
func (r *recoverer) onPage(ctx actor.Context, m *recoverPage) {
	run := r.run
	if run == nil || run.id != m.id {
		return
	}
	run.listing = false
	if m.err != nil {
		r.l.log.Warn("recovery cannot list failed deliveries; trying again", "recovery_id", m.id, "error", m.err)
		r.listPage(ctx, listRetryDelay)
		return
	}
	run.next = m.page.Next
	run.found += int64(len(m.page.Deliveries))
	r.replayPage(ctx, run, m.page.Deliveries)
}

// replayPage replays the deliveries of a page of the running recovery. All
// are counted before any is replayed: a replay already in its stream is
// counted as requested at once. The page is done (pageDone) once each has
// its ReplayRequested.
func (r *recoverer) replayPage(ctx actor.Context, run *recoveryRun, page []history.Delivery) {
	run.outstanding = len(page)
	for _, d := range page {
		r.l.replays.start(ctx, &replayOrder{by: run.by, recoveryID: run.id, view: d})
	}
	r.pageDone(ctx)
	r.l.pump(ctx)
}

// requested counts one replay of the running recovery as requested (its
// ReplayRequested is durable, now or before a restart) or abandoned.
func (r *recoverer) requested(ctx actor.Context, recoveryID string, requested bool) {
	run := r.runOf(recoveryID)
	if run == nil {
		return
	}
	run.outstanding--
	if requested {
		run.requested++
	}
	r.pageDone(ctx)
}

// pageDone records the recovery's progress once every delivery of the page
// has its ReplayRequested, and lists the next page or finishes.
func (r *recoverer) pageDone(ctx actor.Context) {
	l, run := r.l, r.run
	if run == nil || run.listing || run.outstanding > 0 {
		return
	}
	now := timestamppb.New(l.cfg.Now())
	if run.listed {
		if run.loading {
			return
		}
		l.queueOwn(&hooklinev1.RecoveryProgressed{
			TenantId: run.tenantID, EndpointId: l.id, RecoveryId: run.id, Next: run.end,
			Found: run.found, Requested: run.requested, At: now,
		})
		if run.end >= int64(len(run.list)) {
			r.finish(hooklinev1.RecoveryFinished_REASON_DONE)
			return
		}
		run.pos = run.end
		r.nextBatch(ctx, 0)
		return
	}
	l.queueOwn(&hooklinev1.RecoveryProgressed{
		TenantId: run.tenantID, EndpointId: l.id, RecoveryId: run.id, Cursor: run.next,
		Found: run.found, Requested: run.requested, At: now,
	})
	if run.next == "" {
		r.finish(hooklinev1.RecoveryFinished_REASON_DONE)
		return
	}
	run.cursor = run.next
	r.listPage(ctx, 0)
}

// finish ends the running recovery. Its replays already requested still
// get their attempts.
func (r *recoverer) finish(reason hooklinev1.RecoveryFinished_Reason) {
	l, run := r.l, r.run
	l.queueOwn(&hooklinev1.RecoveryFinished{
		TenantId: run.tenantID, EndpointId: l.id, RecoveryId: run.id, Reason: reason,
		Found: run.found, Requested: run.requested, At: timestamppb.New(l.cfg.Now()),
	})
	l.log.Info("recovery finished", "recovery_id", run.id, "reason", reason.String(), "found", run.found, "requested", run.requested)
	r.run, r.finished = nil, run
	l.replays.waiting = slices.DeleteFunc(l.replays.waiting, func(o *replayOrder) bool { return o.recoveryID == run.id && o.sender == nil })
}

// progress counts one manual attempt of a recovery as recorded.
func (r *recoverer) progress(recoveryID string) {
	if run := r.runOf(recoveryID); run != nil {
		run.replayed++
	} else if run := r.finishedRun(recoveryID); run != nil {
		run.replayed++
	}
}

// wait returns after d, or with c's error when c ends first.
func wait(c context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	return pause.For(c, d)
}
