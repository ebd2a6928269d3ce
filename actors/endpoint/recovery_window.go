package endpoint

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// MaxRecoveryList is the most deliveries one recovery lists: a wider window
// is refused, to be split.
const MaxRecoveryList = 50_000

// errWindowTooLarge means the window lists more than MaxRecoveryList.
var errWindowTooLarge = errors.New("endpoint: the window lists more than MaxRecoveryList deliveries; split it into narrower windows")

// recoveryStatuses are the statuses a window may select, by name.
var recoveryStatuses = map[string]history.Status{
	history.Failed.String():    history.Failed,
	history.Succeeded.String(): history.Succeeded,
	history.Pending.String():   history.Pending,
}

// window is what a recovery lists: a range of planned times and a filter.
type window struct {
	tenantID, endpointID string
	since, until         time.Time
	statuses             []string // names, sorted; never empty
	eventTypes           []string // sorted; empty: every type
}

// windowOf checks a request's filter and returns the window it names.
func windowOf(tenantID, endpointID string, rq *controlv1.RecoverEndpointRequest) (window, *command.Error) {
	w := window{tenantID: tenantID, endpointID: endpointID, since: rq.GetSince().AsTime(), until: rq.GetUntil().AsTime()}
	for _, s := range rq.GetStatuses() {
		s = strings.ToLower(strings.TrimSpace(s))
		if _, ok := recoveryStatuses[s]; !ok {
			return window{}, command.Invalid("statuses", "%q is not a status: use failed, succeeded or pending", s)
		}
		w.statuses = append(w.statuses, s)
	}
	if len(w.statuses) == 0 {
		w.statuses = []string{history.Failed.String()}
	}
	for _, t := range rq.GetEventTypes() {
		if t == "" || strings.ContainsAny(t, "*") {
			return window{}, command.Invalid("event_types", "%q: name event types exactly (no wildcard, not empty)", t)
		}
		w.eventTypes = append(w.eventTypes, t)
	}
	slices.Sort(w.statuses)
	w.statuses = slices.Compact(w.statuses)
	slices.Sort(w.eventTypes)
	w.eventTypes = slices.Compact(w.eventTypes)
	return w, nil
}

// windowList is a recovery's list: delivery ids in replay order.
type windowList struct {
	ids         []string
	first, last time.Time // the planned times it spans
	planned     []time.Time
}

// before counts the deliveries of the list planned before t.
func (l windowList) before(t time.Time) int64 {
	n := int64(0)
	for _, p := range l.planned {
		if p.Before(t) {
			n++
		}
	}
	return n
}

// digest returns the list's digest: SHA-256 (hex) over each id and "\n".
func (l windowList) digest() string { return ListDigest(l.ids) }

// ListDigest is the digest of a recovery's list of delivery ids, in replay
// order (planned time, then id): the SHA-256, in hex, of each id followed
// by "\n". A manifest's digest is ListDigest of the ids the recovery
// replays.
func ListDigest(ids []string) string {
	h := sha256.New()
	for _, id := range ids {
		io.WriteString(h, id)
		io.WriteString(h, "\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// list reads the window's deliveries from hist, page by page, in replay
// order. It fails with errWindowTooLarge past MaxRecoveryList.
func (w window) list(hist History) (windowList, error) {
	q := history.Query{TenantID: w.tenantID, EndpointID: w.endpointID, Since: w.since, Until: w.until, Limit: history.MaxLimit}
	if len(w.statuses) == 1 {
		q.Status = recoveryStatuses[w.statuses[0]]
	}
	if len(w.eventTypes) == 1 {
		q.EventType = w.eventTypes[0]
	}
	var found []history.Delivery
	for {
		p, err := hist.Search(q)
		if err != nil {
			return windowList{}, fmt.Errorf("list recovery window: %w", err)
		}
		for _, d := range p.Deliveries {
			if d.EndpointID != w.endpointID || !slices.Contains(w.statuses, d.Status.String()) ||
				(len(w.eventTypes) > 0 && !slices.Contains(w.eventTypes, d.EventType)) {
				continue
			}
			found = append(found, d)
			if len(found) > MaxRecoveryList {
				return windowList{}, errWindowTooLarge
			}
		}
		if p.Next == "" {
			break
		}
		q.Cursor = p.Next
	}
	slices.SortFunc(found, func(a, b history.Delivery) int {
		if c := a.PlannedAt.Compare(b.PlannedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	l := windowList{ids: make([]string, len(found)), planned: make([]time.Time, len(found))}
	for i, d := range found {
		l.ids[i], l.planned[i] = d.ID, d.PlannedAt
	}
	if len(found) > 0 {
		l.first, l.last = found[0].PlannedAt, found[len(found)-1].PlannedAt
	}
	return l, nil
}

// recoverList is a recovery's list as read back from its stream.
type recoverList struct {
	id  string
	ids []string
	err error
}

// recoverBatch is a page of a recovery's list, looked up in the history.
type recoverBatch struct {
	id    string
	views []history.Delivery
	err   error
}

// runList carries out a listed recovery with its list, or reads the list
// back first (ids nil: a new activation resuming it).
func (r *recoverer) runList(ctx actor.Context, rec Recovery, ids []string) {
	l := r.l
	if r.run != nil || !l.caughtUp || !rec.Running() {
		return
	}
	r.run = &recoveryRun{
		id: rec.ID, tenantID: l.state.TenantID, by: rec.IssuedBy, since: rec.Since, until: rec.Until,
		found: rec.Deliveries, requested: rec.Requested, pos: rec.Next, listed: true, loading: ids == nil,
	}
	if ids != nil {
		r.run.list = ids
		r.nextBatch(ctx, 0)
		return
	}
	r.loadList(ctx, rec, 0)
}

// loadList reads a recovery's list back from its stream, off the mailbox,
// after delay.
func (r *recoverer) loadList(ctx actor.Context, rec Recovery, delay time.Duration) {
	l := r.l
	log, page, id, n := l.cfg.Log, l.cfg.ReadPage, rec.ID, rec.Deliveries
	l.async(ctx, 0, func(c context.Context) any {
		if err := wait(c, delay); err != nil {
			return &recoverList{id: id, err: err}
		}
		if n == 0 {
			return &recoverList{id: id, ids: []string{}}
		}
		ids := []string{}
		err := command.ReadStream(c, log, events.RecoveryStream(id), page, func(msg proto.Message, _ events.Revision) {
			if m, ok := msg.(*hooklinev1.RecoveryListed); ok {
				ids = append(ids, m.GetDeliveryIds()...)
			}
		})
		if err != nil {
			return &recoverList{id: id, err: err}
		}
		return &recoverList{id: id, ids: ids}
	})
}

// onList resumes a listed recovery with its list read back, or ends it
// when the list is missing or differs from its digest.
func (r *recoverer) onList(ctx actor.Context, m *recoverList) {
	l, run := r.l, r.runOf(m.id)
	if run == nil || !run.loading {
		return
	}
	rec, _ := l.state.Recovery(m.id)
	if m.err != nil {
		l.log.Warn("recovery cannot read its list; trying again", "recovery_id", m.id, "error", m.err)
		r.loadList(ctx, rec, listRetryDelay)
		return
	}
	run.loading = false
	if int64(len(m.ids)) != rec.Deliveries || ListDigest(m.ids) != rec.Digest {
		l.log.Error("recovery's recorded list is missing or differs from its digest; ending it", "recovery_id", m.id, "deliveries", rec.Deliveries, "listed", len(m.ids))
		r.finish(hooklinev1.RecoveryFinished_REASON_LIST_MISSING)
		return
	}
	run.list = m.ids
	l.log.Info("recovery resumed", "recovery_id", m.id, "next", run.pos, "deliveries", len(m.ids))
	r.nextBatch(ctx, 0)
}

// nextBatch looks up the next page of the running recovery's list in the
// history, off the mailbox, after delay; past the end it finishes.
func (r *recoverer) nextBatch(ctx actor.Context, delay time.Duration) {
	l, run := r.l, r.run
	if run.pos >= int64(len(run.list)) {
		run.end = run.pos
		r.pageDone(ctx)
		return
	}
	run.listing = true
	batch := run.list[run.pos:min(int64(len(run.list)), run.pos+int64(l.cfg.PullLimit))]
	hist, tenantID, id := l.cfg.History, run.tenantID, run.id
	l.async(ctx, 0, func(c context.Context) any {
		if err := wait(c, delay); err != nil {
			return &recoverBatch{id: id, err: err}
		}
		views := make([]history.Delivery, len(batch))
		for i, did := range batch {
			d, ok, err := hist.Get(tenantID, did)
			if err != nil {
				return &recoverBatch{id: id, err: err}
			}
			if !ok {
				d = history.Delivery{ID: did} // pruned since: counted, not replayed
			}
			views[i] = d
		}
		return &recoverBatch{id: id, views: views}
	})
}

// onBatch replays a page of a listed recovery, passing over the
// deliveries the history no longer holds.
func (r *recoverer) onBatch(ctx actor.Context, m *recoverBatch) {
	l, run := r.l, r.runOf(m.id)
	if run == nil || !run.listing {
		return
	}
	run.listing = false
	if m.err != nil {
		l.log.Warn("recovery cannot read its deliveries from the history; trying again", "recovery_id", m.id, "error", m.err)
		r.nextBatch(ctx, listRetryDelay)
		return
	}
	run.end = run.pos + int64(len(m.views))
	views := slices.DeleteFunc(m.views, func(d history.Delivery) bool {
		if d.EndpointID != l.id || d.TenantID != run.tenantID {
			l.log.Warn("recovery passes over a listed delivery the history no longer holds", "recovery_id", m.id, "delivery_id", d.ID)
			return true
		}
		return false
	})
	r.replayPage(ctx, run, views)
}
