package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// tenantTypes are the tenant stream's events the registry follows.
var tenantTypes = []string{"TenantCreated", "TenantQuotaChanged", "ApiKeyIssued", "ApiKeyRevoked"}

// ErrNotConfigured means Part was called on a Reconciler made without the
// node's projections.
var ErrNotConfigured = errors.New("reconcile: the node's projections are not configured")

// local is what one Part run gathers.
type local struct {
	run   Run
	parts events.PartitionSet
	now   time.Time
	// cutoff: deliveries planned before it are not compared, the history
	// having pruned them, or the log's retention dropped them (to the
	// archive); histCutoff, at or before it, is the history's own.
	cutoff, histCutoff time.Time
	subs               *subscriptions
	ds                 *deliveries
	// tenants and their streams' last positions, for the registry.
	tenants map[string]events.Position
	// items is the node's due index, by delivery.
	items map[string]due.Item
	// records is the node's history, by delivery.
	records map[string]history.Delivery
	// rebuild names the projections a repair rebuilds, and the
	// discrepancies it repairs.
	rebuild map[string][]*controlv1.Discrepancy
	wake    []*controlv1.Discrepancy
}

// Part is checks 2 to 5 for the partitions parts of this node (which must
// serve them): the deliveries planned in them against the delivery streams
// and the due index, the due index against the grains, the attempts
// against the log and the history, and each projection against a replay.
// It waits until the node's projections have applied the log up to
// run.Head. With run.Repair it wakes grains and rebuilds projections.
func (r *Reconciler) Part(ctx context.Context, run Run, parts events.PartitionSet) (*internalv1.ReconcilePartDone, error) {
	if r.cfg.Runner == nil || r.cfg.Registry == nil || r.cfg.Due == nil || r.cfg.History == nil {
		return nil, ErrNotConfigured
	}
	parts.Remove(events.NoPartition)
	withNone := parts
	withNone.Add(events.NoPartition)
	if err := r.cfg.Runner.WaitForPartitions(ctx, withNone, run.Head); err != nil {
		return nil, fmt.Errorf("wait for the projections: %w", err)
	}
	p := newTally(r.cfg.Node, run.MaxListed)
	now := r.cfg.Now()
	l := &local{
		run: run, parts: parts, now: now, cutoff: r.logCutoff(now), histCutoff: now.Add(-r.cfg.Retention + 24*time.Hour),
		subs: newSubscriptions(), ds: newDeliveries(parts), tenants: map[string]events.Position{},
		rebuild: map[string][]*controlv1.Discrepancy{},
	}
	// The replay reads the log beside the scan.
	replaying := startReplayAside(ctx, r.cfg.Log, run, parts)
	defer replaying.close()
	if err := r.gather(ctx, l, withNone); err != nil {
		return nil, err
	}

	if err := r.checkDeliveries(ctx, p, l); err != nil {
		return nil, err
	}
	if err := r.checkGrains(ctx, p, l); err != nil {
		return nil, err
	}
	if err := r.checkAttempts(ctx, p, l); err != nil {
		return nil, err
	}
	if err := r.checkArchive(ctx, p, l); err != nil {
		return nil, err
	}
	rp, err := replaying.wait()
	switch {
	case run.SkipReplay:
	case err != nil:
		return nil, fmt.Errorf("replay: %w", err)
	default:
		if err := r.compare(ctx, p, l, rp); err != nil {
			return nil, err
		}
	}
	if run.Repair {
		r.repair(ctx, p, l)
	}
	return p.done(parts), nil
}

// gather reads what the checks compare: the log up to the head (the
// endpoints' subscriptions, the tenants, and the deliveries of l's
// partitions), the node's due index and its history.
func (r *Reconciler) gather(ctx context.Context, l *local, withNone events.PartitionSet) error {
	filter := events.Filter{
		Types:      append(append(append([]string{}, deliveryTypes...), endpointTypes...), tenantTypes...),
		Partitions: &withNone,
	}
	err := scan(ctx, r.cfg.Log, l.run.Head, filter, func(rec *events.Record) error {
		msg, err := events.Decode(rec)
		if err != nil {
			return err
		}
		switch events.Category(rec.Stream) {
		case events.EndpointCategory:
			l.subs.apply(rec, msg)
		case events.TenantCategory:
			l.tenants[rec.Stream[len(events.TenantCategory)+1:]] = rec.Position
		default:
			l.ds.apply(rec, msg)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if l.items, err = dueItems(r.cfg.Due, l.parts); err != nil {
		return fmt.Errorf("read the due index: %w", err)
	}
	if l.records, err = historyRecords(r.cfg.History, l.parts, time.Time{}); err != nil {
		return fmt.Errorf("read the history: %w", err)
	}
	return nil
}

// dueItems reads the items of parts in a due index, by delivery.
func dueItems(d *due.Due, parts events.PartitionSet) (map[string]due.Item, error) {
	items := map[string]due.Item{}
	var err error
	parts.Each(func(part events.Partition) {
		if err == nil {
			err = d.Each(part, func(it due.Item) error {
				items[it.DeliveryID] = it
				return nil
			})
		}
	})
	return items, err
}

// historyRecords reads the records of parts in a history that were
// planned at since or later, by delivery.
func historyRecords(h *history.History, parts events.PartitionSet, since time.Time) (map[string]history.Delivery, error) {
	records := map[string]history.Delivery{}
	err := h.Each(func(d history.Delivery) error {
		if parts.Has(events.PartitionOf(d.EndpointID)) && !d.PlannedAt.Before(since) {
			records[d.ID] = d
		}
		return nil
	})
	return records, err
}

// moved reports whether a delivery's streams moved past the head.
func (r *Reconciler) moved(ctx context.Context, l *local, d *delivery, id string) (bool, error) {
	streams := []string{events.DeliveryStream(id)}
	if d != nil && d.event != "" {
		streams = append(streams, events.EventStream(d.tenant, d.event))
	}
	return movedPast(ctx, r.cfg.Log, l.run.Head, streams...)
}

// checkDeliveries is check 2: the log's pending deliveries are in the due
// index, its ended ones are not, and the index holds nothing the log did
// not plan.
func (r *Reconciler) checkDeliveries(ctx context.Context, p *tally, l *local) error {
	ids := slices.Sorted(maps.Keys(l.ds.byID))
	p.examined(CheckDeliveries, len(ids))
	for _, id := range ids {
		d := l.ds.byID[id]
		if d.planned {
			t := p.tenant(d.tenant)
			t.Planned++
			switch d.status {
			case history.Succeeded:
				t.Succeeded++
			case history.Failed:
				t.Failed++
			default:
				t.Pending++
			}
		}
		_, inIndex := l.items[id]
		var kind, detail string
		switch {
		case d.due && !inIndex:
			kind = KindStranded
			detail = fmt.Sprintf("the log leaves %s pending (%d attempts recorded) and the due index does not hold it: neither due, in flight nor ended", id, d.recorded)
		case !d.due && inIndex:
			kind = KindDueAfterEnd
			detail = fmt.Sprintf("the log ended %s (%s) and the due index still holds it", id, d.status)
		default:
			continue
		}
		if err := r.rebuildUnlessMoved(ctx, p, l, due.Name, d, &controlv1.Discrepancy{Kind: kind, Check: CheckDeliveries,
			TenantId: d.tenant, EventId: d.event, EndpointId: d.endpoint, DeliveryIds: []string{id}, Detail: detail}); err != nil {
			return err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(l.items)) {
		if _, known := l.ds.byID[id]; known {
			continue
		}
		it := l.items[id]
		if err := r.rebuildUnlessMoved(ctx, p, l, due.Name, &delivery{tenant: it.TenantID, event: it.EventID}, &controlv1.Discrepancy{
			Kind: KindDueUnplanned, Check: CheckDeliveries, TenantId: it.TenantID, EventId: it.EventID, EndpointId: it.EndpointID,
			DeliveryIds: []string{id}, Detail: fmt.Sprintf("the due index holds %s, which the log never planned nor recorded", id),
		}); err != nil {
			return err
		}
	}
	return nil
}

// addRebuild records a discrepancy that rebuilding projection name repairs.
func (r *Reconciler) addRebuild(p *tally, l *local, name string, d *controlv1.Discrepancy) {
	// The registry is rebuilt only on a stopped node (see Runner.Rebuild).
	d.Repairable = name != registry.Name || r.cfg.Offline
	d.Repair = "rebuild the " + name + " projection from the log"
	if !d.Repairable {
		d.Repair = "rebuild the registry with the node stopped: hookline reconcile --data DIR --repair"
	}
	p.add(d)
	l.rebuild[name] = append(l.rebuild[name], d)
}

// rebuildUnlessMoved records disc, about delivery d (its one delivery id),
// as repaired by rebuilding projection name, unless d's streams moved past
// the head: then the comparison proves nothing.
func (r *Reconciler) rebuildUnlessMoved(ctx context.Context, p *tally, l *local, name string, d *delivery, disc *controlv1.Discrepancy) error {
	moved, err := r.moved(ctx, l, d, disc.GetDeliveryIds()[0])
	if err != nil || moved {
		return err
	}
	r.addRebuild(p, l, name, disc)
	return nil
}

// checkGrains is check 3: due work that no grain pulls.
func (r *Reconciler) checkGrains(ctx context.Context, p *tally, l *local) error {
	notPulled := r.cfg.NotPulledAfter
	if l.run.NotPulledAfter > 0 {
		notPulled = l.run.NotPulledAfter
	}
	type waiting struct {
		oldest time.Time
		n      int
		ids    []string
	}
	byEndpoint := map[string]*waiting{}
	for _, it := range l.items {
		e := l.subs.endpoints[it.EndpointID]
		t := p.tenant(it.TenantID)
		t.Due++
		if e != nil && !e.deleted && (e.paused || e.disabled) {
			t.Held++
		}
		since := it.DueAt
		if it.Waiting || (it.Class == due.ClassRetry && since.After(l.now)) {
			continue // not due yet, or waiting for its ordering key's turn
		}
		w := byEndpoint[it.EndpointID]
		if w == nil {
			w = &waiting{oldest: since}
			byEndpoint[it.EndpointID] = w
		}
		w.n++
		if since.Before(w.oldest) {
			w.oldest = since
		}
		if len(w.ids) < 20 {
			w.ids = append(w.ids, it.DeliveryID)
		}
	}
	p.examined(CheckGrains, len(byEndpoint))
	if r.cfg.Pulls == nil {
		p.notef("node %s: no grains run here (a stopped node): due work that no grain pulls is not checked", r.cfg.Node)
	}
	for _, ep := range slices.Sorted(maps.Keys(byEndpoint)) {
		w := byEndpoint[ep]
		e := l.subs.endpoints[ep]
		if e == nil || l.now.Sub(w.oldest) < notPulled {
			continue
		}
		var kind, detail string
		switch {
		case e.deleted:
			kind = KindDeletedHolding
			detail = fmt.Sprintf("endpoint %s is deleted and holds %d due deliveries, the oldest due since %s: its grain ends them when woken", ep, w.n, w.oldest.Format(time.RFC3339))
		case e.paused || e.disabled:
			continue // held: the tenant resumes or deletes it
		case r.cfg.Pulls == nil:
			continue
		default:
			last := r.cfg.Pulls.LastPull(ep)
			if last.Before(r.cfg.Started) {
				last = r.cfg.Started
			}
			if l.now.Sub(last) < notPulled {
				continue
			}
			if (e.circuit == "open" && l.now.Sub(e.openUntil) < notPulled) || e.circuit == "half_open" {
				continue // its breaker holds it back, by design
			}
			kind = KindNotPulled
			detail = fmt.Sprintf("endpoint %s has %d deliveries due, the oldest since %s, and its grain has not pulled for %s", ep, w.n, w.oldest.Format(time.RFC3339), l.now.Sub(last).Round(time.Second))
		}
		if moved, err := movedPast(ctx, r.cfg.Log, l.run.Head, events.EndpointStream(ep)); err != nil || moved {
			if err != nil {
				return err
			}
			continue
		}
		d := &controlv1.Discrepancy{Kind: kind, Check: CheckGrains, TenantId: e.tenant, EndpointId: ep, DeliveryIds: w.ids, Detail: detail}
		d.Repairable = r.cfg.Wake != nil
		d.Repair = "wake the endpoint's grain"
		if !d.Repairable {
			d.Repair = "none here: the node wakes it when it starts (its sweeper)"
		}
		p.add(d)
		l.wake = append(l.wake, d)
	}
	return nil
}

// checkAttempts is check 4: the attempts the log records are consistent,
// and the history agrees with them.
func (r *Reconciler) checkAttempts(ctx context.Context, p *tally, l *local) error {
	ids := slices.Sorted(maps.Keys(l.ds.byID))
	p.examined(CheckAttempts, len(ids))
	for _, id := range ids {
		d := l.ds.byID[id]
		base := func(kind, detail, repair string) *controlv1.Discrepancy {
			return &controlv1.Discrepancy{Kind: kind, Check: CheckAttempts, TenantId: d.tenant, EventId: d.event,
				EndpointId: d.endpoint, DeliveryIds: []string{id}, Detail: detail, Repair: repair}
		}
		const truth = "none: the log is the truth; this is reported for people"
		if d.numbering != "" {
			p.add(base(KindAttemptNumbering, id+": "+d.numbering, truth))
		}
		if d.expired != "" {
			p.add(base(KindExpiredCount, id+": "+d.expired, truth))
		}
		if d.autoSuccess > 1 {
			p.add(base(KindSucceededTwice, fmt.Sprintf("%s: %d automatic attempts were recorded as succeeded (one delivery, delivered twice by the grains)", id, d.autoSuccess), truth))
		}
		if h, ok := l.records[id]; !d.planned && d.outcomes && !(ok && h.PlannedAt.Before(l.cutoff)) {
			p.add(base(KindOutcomeUnplanned, fmt.Sprintf("%s: its stream records outcomes and no plan of it is in the log", id), truth))
		}
		if !d.planned || d.plannedAt.Before(l.cutoff) {
			continue
		}
		h, ok := l.records[id]
		var kind, detail string
		switch {
		case !ok:
			kind, detail = KindHistoryMissing, fmt.Sprintf("%s is planned in the log and has no history record", id)
		case h.Status == history.Succeeded && !d.succeeded:
			kind, detail = KindSuccessNoAttempt, fmt.Sprintf("the history says %s succeeded; the log records no successful attempt (%d attempts)", id, d.recorded)
		case h.Status != d.status:
			kind, detail = KindHistoryStatus, fmt.Sprintf("the history says %s is %s; the log says %s", id, h.Status, d.status)
		case h.Attempts != d.histAttempts:
			kind, detail = KindAttemptCount, fmt.Sprintf("the history counts %d attempts of %s (%s); the log records %d", h.Attempts, id, h.Status, d.histAttempts)
		default:
			continue
		}
		if err := r.rebuildUnlessMoved(ctx, p, l, history.Name, d, base(kind, detail, "")); err != nil {
			return err
		}
	}
	for _, id := range slices.Sorted(maps.Keys(l.records)) {
		h := l.records[id]
		if d, ok := l.ds.byID[id]; (ok && d.planned) || h.PlannedAt.Before(l.cutoff) {
			continue
		}
		if err := r.rebuildUnlessMoved(ctx, p, l, history.Name, &delivery{tenant: h.TenantID, event: h.EventID}, &controlv1.Discrepancy{
			Kind: KindHistoryStatus, Check: CheckAttempts, TenantId: h.TenantID, EventId: h.EventID, EndpointId: h.EndpointID,
			DeliveryIds: []string{id}, Detail: fmt.Sprintf("the history holds %s (%s), which the log never planned", id, h.Status),
		}); err != nil {
			return err
		}
	}
	return nil
}

// logCutoff is what Part compares from: the later of the history's
// cutoff and now minus the log's retention, with a margin for clocks and
// retention passes (a tenth of the retention, at most an hour).
func (r *Reconciler) logCutoff(now time.Time) time.Time {
	hist := now.Add(-r.cfg.Retention + 24*time.Hour)
	if r.cfg.LogRetention <= 0 {
		return hist
	}
	c := now.Add(-r.cfg.LogRetention + min(r.cfg.LogRetention/10, time.Hour))
	if c.Before(hist) {
		return hist
	}
	return c
}

// checkArchive is check 6: every delivery the history holds whose plan
// the log's retention may have dropped has its event in the log or in the
// archive (what a late replay reads). Without an archive, there is nothing
// to check: retention drops for good.
func (r *Reconciler) checkArchive(ctx context.Context, p *tally, l *local) error {
	if r.cfg.Archive == nil {
		return nil
	}
	n := 0
	for _, id := range slices.Sorted(maps.Keys(l.records)) {
		h := l.records[id]
		if !h.PlannedAt.Before(l.cutoff) || h.PlannedAt.Before(l.histCutoff) {
			continue
		}
		n++
		stream := events.EventStream(h.TenantID, h.EventID)
		if d, ok := l.ds.byID[id]; ok && d.planned {
			continue // still in the log
		}
		ok, err := r.cfg.Archive.Has(ctx, stream)
		if err != nil {
			return fmt.Errorf("archive: %w", err)
		}
		if !ok {
			p.add(&controlv1.Discrepancy{Kind: KindArchiveMissing, Check: CheckArchive, TenantId: h.TenantID, EventId: h.EventID,
				EndpointId: h.EndpointID, DeliveryIds: []string{id},
				Detail: fmt.Sprintf("%s is past the log's retention and its event %s is in neither the log nor the archive: a replay of it would end failed", id, stream),
				Repair: "none: the bytes are gone; check the archive's bucket and its lifecycle rules"})
		}
	}
	p.examined(CheckArchive, n)
	return nil
}

// repair wakes the grains and rebuilds the projections the run found
// wanting, recording each repair in the node's stream of the run.
func (r *Reconciler) repair(ctx context.Context, p *tally, l *local) {
	audit := r.auditor(l.run, r.cfg.Node)
	for _, d := range l.wake {
		if !d.GetRepairable() {
			continue
		}
		if err := r.cfg.Wake(ctx, d.GetEndpointId()); err != nil {
			p.notef("wake of %s failed: %v", d.GetEndpointId(), err)
			continue
		}
		if err := audit.record(ctx, &hooklinev1.ReconcileRepaired{Kind: hooklinev1.ReconcileRepaired_KIND_WOKEN,
			Reason: d.GetKind() + ": " + d.GetDetail(), TenantId: d.GetTenantId(), EndpointId: d.GetEndpointId(), DeliveryIds: d.GetDeliveryIds()}); err != nil {
			p.notef("%v", err)
			continue
		}
		p.repaired(d)
	}
	rebuilt := false
	for _, name := range slices.Sorted(maps.Keys(l.rebuild)) {
		ds := l.rebuild[name]
		if !ds[0].GetRepairable() {
			continue
		}
		if err := r.cfg.Runner.Rebuild(name); err != nil {
			p.notef("rebuild of %s failed: %v", name, err)
			continue
		}
		rebuilt = true
		reason := fmt.Sprintf("%d discrepancies of the %s projection with the log, first %s: %s", len(ds), name, ds[0].GetKind(), ds[0].GetDetail())
		if err := audit.record(ctx, &hooklinev1.ReconcileRepaired{Kind: hooklinev1.ReconcileRepaired_KIND_REBUILT,
			Reason: reason, Projection: name}); err != nil {
			p.notef("%v", err)
			continue
		}
		for _, d := range ds {
			p.repaired(d)
		}
	}
	if rebuilt {
		// The partitions catch up again; the run answers once they serve.
		wctx, cancel := context.WithTimeout(ctx, r.cfg.RebuildTimeout)
		defer cancel()
		if err := r.cfg.Runner.WaitForPartitions(wctx, l.parts, l.run.Head); err != nil {
			p.notef("rebuilt projections not caught up yet: %v", err)
		}
	}
}
