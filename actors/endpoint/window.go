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
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Window recoveries: a recovery's exact list, its dry run and its digest.
//
// A RecoverEndpointRequest names a window of planned times [since, until)
// and a filter: statuses (failed, the default; succeeded; pending) and
// event types. The grain lists the endpoint's deliveries that match from
// the history projection (its own partition is served on this node, where
// the cluster places the grain), once the projections have applied the log
// up to its head at the request: the list reflects every outcome committed
// before. The list is in replay order (planned time, then delivery id),
// and its digest is the SHA-256 (hex) of its delivery ids, each followed
// by "\n": anyone holding the ids can compute it.
//
// With dry_run the grain answers the manifest (how many, the digest, the
// first ids, the planned times it spans, and the time the list takes at
// the least under the endpoint's token bucket: (n - burst) / rate) and
// writes nothing. Without it, a digest given must equal the list's, or the
// request is refused (FAILED_PRECONDITION naming digest): what runs is
// exactly what the dry run showed. The grain then records the list on
// recovery-{recovery_id} (RecoveryListed chunks, one append with expected
// revision "no stream"), and only then appends RecoveryStarted (with the
// list's length and digest) to its own stream. The run replays the list in
// order, a page at a time, each delivery with its original webhook-id (its
// delivery id) exactly as a replay command would; RecoveryProgressed
// records the index of the next delivery once a page's ReplayRequested are
// durable, and RecoveryFinished ends it. A new activation (a restart, a
// failover) reads the list back from recovery-{recovery_id}, checks it
// against the recorded length and digest (REASON_LIST_MISSING when it
// cannot), and resumes from the recorded index; a delivery of the page
// under way when the grain stopped is not replayed twice, since its stream
// holds a ReplayRequested of this recovery.

// MaxRecoveryList is the most deliveries one recovery lists: a wider window
// is refused, to be split.
const MaxRecoveryList = 50_000

// listedChunk is how many delivery ids one RecoveryListed holds.
const listedChunk = 1000

// manifestIDs is how many of the list's first ids a manifest shows.
const manifestIDs = 20

// errWindowTooLarge means the window lists more than MaxRecoveryList.
var errWindowTooLarge = errors.New("endpoint: the window lists too many deliveries")

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
	l := windowList{ids: make([]string, len(found))}
	for i, d := range found {
		l.ids[i] = d.ID
	}
	if len(found) > 0 {
		l.first, l.last = found[0].PlannedAt, found[len(found)-1].PlannedAt
	}
	return l, nil
}

// rate returns the endpoint's token bucket: its own rate and burst, or the
// node's defaults.
func (g *grain) rate() (perSecond float64, burst int) {
	perSecond, burst = g.state.Config.GetRatePerSecond(), int(g.state.Config.GetBurst())
	if perSecond <= 0 {
		perSecond = g.cfg.RatePerSecond
	}
	if burst <= 0 {
		burst = g.cfg.Burst
	}
	return perSecond, burst
}

// manifest describes a list of n deliveries with digest; l, when given,
// adds the first ids and the planned times it spans.
func (g *grain) manifest(n int64, digest string, l *windowList) *controlv1.RecoveryManifest {
	r, b := g.rate()
	m := &controlv1.RecoveryManifest{Deliveries: n, Digest: digest, RatePerSecond: r, Burst: int32(b)}
	if over := n - int64(b); over > 0 && r > 0 {
		m.EstimatedSeconds = float64(over) / r
	}
	if l != nil {
		m.DeliveryIds = l.ids[:min(len(l.ids), manifestIDs)]
		if len(l.ids) > 0 {
			m.FirstPlannedAt, m.LastPlannedAt = timestamppb.New(l.first), timestamppb.New(l.last)
		}
	}
	return m
}

// listed is the result of listing a window for a recover command.
type listed struct {
	w   window
	l   windowList
	err error
}

// handleWindow lists the window of a checked RecoverEndpointRequest, off
// the mailbox, and answers its manifest (dry run) or starts the recovery.
func (g *grain) handleWindow(ctx actor.Context, r *request, w window) {
	rq := r.Cmd.GetRecover()
	log, proj, hist, p := g.cfg.Log, g.cfg.Projections, g.cfg.History, g.partition()
	g.core.IO(ctx, r, func(c context.Context) (any, error) {
		// The list reflects every outcome committed before the request.
		head, err := log.Head(c)
		if err != nil {
			return nil, fmt.Errorf("read the log's head: %w", err)
		}
		if err := proj.WaitForPartition(c, p, head); err != nil {
			return nil, fmt.Errorf("wait for the projections: %w", err)
		}
		l, err := w.list(hist)
		return listed{w: w, l: l}, err
	}, func(res any, err error) {
		switch {
		case errors.Is(err, errWindowTooLarge):
			g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.Invalid("since", "the window lists more than %d deliveries: split it into narrower windows", MaxRecoveryList).Proto()})
			return
		case err != nil:
			g.log.Warn("endpoint grain cannot list a recovery window", "error", err)
			g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot list the window's deliveries from the history; retry"))
			return
		}
		l := res.(listed).l
		digest := l.digest()
		if rq.GetDryRun() {
			g.reply(ctx, r.Sender, &internalv1.EndpointReply{Recovery: &controlv1.Recovery{
				EndpointId: g.id, Since: rq.GetSince(), Until: rq.GetUntil(), State: "dry_run", DryRun: true,
				Statuses: w.statuses, EventTypes: w.eventTypes, Found: int64(len(l.ids)),
				Manifest: g.manifest(int64(len(l.ids)), digest, &l),
			}})
			return
		}
		if d := rq.GetDigest(); d != "" && !strings.EqualFold(d, digest) {
			g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.FailedPrecondition("digest",
				"the window now lists %d deliveries with digest %s, not the list the dry run described: run the dry run again and check its manifest", len(l.ids), digest).Proto()})
			return
		}
		if e := g.canRecover(); e != nil {
			g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: e.Proto()})
			return
		}
		g.startWindow(ctx, r, w, l, digest)
	})
}

// canRecover refuses a recovery of an endpoint that is not active, or
// runs one already.
func (g *grain) canRecover() *command.Error {
	if g.state.Status != controlv1.Endpoint_STATUS_ACTIVE {
		return command.FailedPrecondition("", "endpoint %s is %s: resume it before recovering its deliveries", g.id, statusWord(g.state.Status))
	}
	if running, busy := g.state.RunningRecovery(); busy {
		return command.FailedPrecondition("", "recovery %s of endpoint %s is running; wait for it to finish (GET its progress) before starting another", running.ID, g.id)
	}
	return nil
}

// startWindow records the list on recovery-{id}, then RecoveryStarted, and
// starts the run.
func (g *grain) startWindow(ctx actor.Context, r *request, w window, l windowList, digest string) {
	var b [8]byte
	if _, err := io.ReadFull(g.cfg.Rand, b[:]); err != nil {
		g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_INTERNAL, "cannot draw a recovery id"))
		return
	}
	id := "rcv_" + hex.EncodeToString(b[:])
	stream, now := events.RecoveryStream(id), timestamppb.New(g.cfg.Now())
	chunks := (len(l.ids) + listedChunk - 1) / listedChunk
	evs := make([]events.Event, 0, chunks)
	for i := range chunks {
		m := &hooklinev1.RecoveryListed{
			TenantId: w.tenantID, EndpointId: g.id, RecoveryId: id, Chunk: int32(i), Chunks: int32(chunks),
			DeliveryIds: l.ids[i*listedChunk : min(len(l.ids), (i+1)*listedChunk)], At: now,
		}
		ev, err := events.EncodeIn(m, fmt.Sprintf("recovery.listed/%s/%d", id, i), stream, g.partition())
		if err != nil {
			g.log.Error("endpoint grain cannot encode a recovery's list", "recovery_id", id, "error", err)
			g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_INTERNAL, "cannot encode the recovery's list"))
			return
		}
		evs = append(evs, ev)
	}
	log := g.cfg.Log
	g.core.IO(ctx, r, func(c context.Context) (any, error) {
		if len(evs) == 0 {
			return nil, nil // an empty list: nothing to read back
		}
		_, err := log.Append(c, stream, events.NoStream{}, evs...)
		return nil, err
	}, func(_ any, err error) {
		if err != nil {
			g.log.Warn("endpoint grain cannot record a recovery's list", "recovery_id", id, "error", err)
			g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot record the recovery's list; retry"))
			return
		}
		rq := r.Cmd.GetRecover()
		started := &hooklinev1.RecoveryStarted{
			TenantId: w.tenantID, EndpointId: g.id, RecoveryId: id, Since: rq.GetSince(), Until: rq.GetUntil(),
			IssuedBy: r.Cmd.GetIssuedBy(), At: now, RequestId: r.Cmd.GetRequestId(),
			Statuses: w.statuses, EventTypes: w.eventTypes, Deliveries: int64(len(l.ids)), Digest: digest,
		}
		g.core.Append(ctx, r, "recover", []proto.Message{started}, g.state.Apply, func() {
			rec, _ := g.state.Recovery(id)
			g.log.Info("recovery started", "recovery_id", id, "since", w.since, "until", w.until, "deliveries", len(l.ids), "digest", digest)
			v := g.recoveryView(rec)
			v.Manifest = g.manifest(int64(len(l.ids)), digest, &l)
			g.reply(ctx, r.Sender, &internalv1.EndpointReply{Recovery: v})
			g.runList(ctx, rec, l.ids)
		})
	})
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
func (g *grain) runList(ctx actor.Context, rec Recovery, ids []string) {
	l := g.loop
	if l.recovery != nil || !l.caughtUp || !rec.Running() {
		return
	}
	l.recovery = &recoveryRun{
		id: rec.ID, tenantID: g.state.TenantID, by: rec.IssuedBy, since: rec.Since, until: rec.Until,
		found: rec.Deliveries, requested: rec.Requested, pos: rec.Next, listed: true, loading: ids == nil,
	}
	if ids != nil {
		l.recovery.list = ids
		g.nextBatch(ctx, 0)
		return
	}
	g.loadList(ctx, rec, 0)
}

// loadList reads a recovery's list back from its stream, off the mailbox,
// after delay.
func (g *grain) loadList(ctx actor.Context, rec Recovery, delay time.Duration) {
	log, page, id, n := g.cfg.Log, g.cfg.ReadPage, rec.ID, rec.Deliveries
	g.async(ctx, 0, func(c context.Context) any {
		if err := wait(c, delay); err != nil {
			return &recoverList{id: id, err: err}
		}
		if n == 0 {
			return &recoverList{id: id, ids: []string{}}
		}
		ids := []string{}
		for from := events.Revision(0); ; {
			recs, err := log.ReadStream(c, events.RecoveryStream(id), events.Forwards, from, page)
			if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
				return &recoverList{id: id, err: err}
			}
			for i := range recs {
				msg, err := events.Decode(&recs[i])
				if err != nil {
					return &recoverList{id: id, err: err}
				}
				if m, ok := msg.(*hooklinev1.RecoveryListed); ok {
					ids = append(ids, m.GetDeliveryIds()...)
				}
			}
			if len(recs) < page {
				return &recoverList{id: id, ids: ids}
			}
			from = recs[len(recs)-1].Revision + 1
		}
	})
}

func (g *grain) onRecoverList(ctx actor.Context, m *recoverList) {
	run := g.runOf(m.id)
	if run == nil || !run.loading {
		return
	}
	rec, _ := g.state.Recovery(m.id)
	if m.err != nil {
		g.log.Warn("recovery cannot read its list; trying again", "recovery_id", m.id, "error", m.err)
		g.loadList(ctx, rec, listRetryDelay)
		return
	}
	run.loading = false
	if int64(len(m.ids)) != rec.Deliveries || ListDigest(m.ids) != rec.Digest {
		g.log.Error("recovery's recorded list is missing or differs from its digest; ending it", "recovery_id", m.id, "deliveries", rec.Deliveries, "listed", len(m.ids))
		g.finishRecovery(hooklinev1.RecoveryFinished_REASON_LIST_MISSING)
		return
	}
	run.list = m.ids
	g.log.Info("recovery resumed", "recovery_id", m.id, "next", run.pos, "deliveries", len(m.ids))
	g.nextBatch(ctx, 0)
}

// nextBatch looks up the next page of the running recovery's list in the
// history, off the mailbox, after delay; past the end it finishes.
func (g *grain) nextBatch(ctx actor.Context, delay time.Duration) {
	run := g.loop.recovery
	if run.pos >= int64(len(run.list)) {
		run.end = run.pos
		g.pageDone(ctx)
		return
	}
	run.listing = true
	batch := run.list[run.pos:min(int64(len(run.list)), run.pos+int64(g.cfg.PullLimit))]
	hist, tenantID, id := g.cfg.History, run.tenantID, run.id
	g.async(ctx, 0, func(c context.Context) any {
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

func (g *grain) onRecoverBatch(ctx actor.Context, m *recoverBatch) {
	run := g.runOf(m.id)
	if run == nil || !run.listing {
		return
	}
	run.listing = false
	if m.err != nil {
		g.log.Warn("recovery cannot read its deliveries from the history; trying again", "recovery_id", m.id, "error", m.err)
		g.nextBatch(ctx, listRetryDelay)
		return
	}
	run.end = run.pos + int64(len(m.views))
	views := slices.DeleteFunc(m.views, func(d history.Delivery) bool {
		if d.EndpointID != g.id || d.TenantID != run.tenantID {
			g.log.Warn("recovery passes over a listed delivery the history no longer holds", "recovery_id", m.id, "delivery_id", d.ID)
			return true
		}
		return false
	})
	// All counted before any is replayed: a replay already in its stream
	// is counted as requested at once.
	run.outstanding = len(views)
	for _, d := range views {
		g.replay(ctx, &replayOrder{by: run.by, recoveryID: run.id, view: d})
	}
	g.pageDone(ctx)
	g.pump(ctx)
}

// wait returns after d, or with c's error when c ends first.
func wait(c context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-c.Done():
		return c.Err()
	}
}
