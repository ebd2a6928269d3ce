package reconcile

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/filter"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// publication is one event stream as the log has it up to the head.
type publication struct {
	stream    string
	tenant    string
	event     string
	eventType string
	// orderingKey is the event's ordering key (from EventPublished).
	orderingKey string
	published   bool
	position    events.Position // of EventPublished
	// expected is the snapshot: endpoint → config version (and filter)
	// subscribed at the EventPublished's position.
	expected map[string]subscribed
	// planned are the deliveries planned, by endpoint (repairs included).
	planned map[string]*hooklinev1.PlannedDelivery
	// filtered are the subscribed endpoints whose filter did not pass the
	// event, by endpoint (repairs included).
	filtered map[string]*hooklinev1.FilteredEndpoint
	// chunks is the publish's chunk count, seen its chunks present.
	chunks int32
	seen   []int32
	// repairs counts the chunks appended by reconciliation.
	repairs int
}

// Plans is check 1: every published event against its plan and against
// the subscriptions of its time. With run.Repair it plans what is missing.
// Its part carries the events published per tenant (the deliveries are
// counted by the partitions' parts).
func (r *Reconciler) Plans(ctx context.Context, run Run) (*internalv1.ReconcilePartDone, error) {
	p := newTally(r.cfg.Node, run.MaxListed)
	subs := newSubscriptions()
	pubs := map[string]*publication{}
	var order []*publication
	get := func(stream string) *publication {
		pb, ok := pubs[stream]
		if !ok {
			pb = &publication{stream: stream, planned: map[string]*hooklinev1.PlannedDelivery{}, filtered: map[string]*hooklinev1.FilteredEndpoint{}}
			pubs[stream] = pb
			order = append(order, pb)
		}
		return pb
	}
	filter := events.Filter{
		StreamPrefixes: []string{events.EventCategory + "-", events.EndpointCategory + "-"},
		Types:          append([]string{"EventPublished", "DeliveriesPlanned"}, endpointTypes...),
	}
	err := scan(ctx, r.cfg.Log, run.Head, filter, func(rec *events.Record) error {
		msg, err := events.Decode(rec)
		if err != nil {
			return err
		}
		switch m := msg.(type) {
		case *hooklinev1.EventPublished:
			pb := get(rec.Stream)
			pb.tenant, pb.event, pb.eventType = m.GetTenantId(), m.GetEventId(), m.GetEventType()
			pb.published, pb.position, pb.orderingKey = true, rec.Position, m.GetOrderingKey()
			pb.expected = subs.snapshot(pb.tenant, pb.eventType)
		case *hooklinev1.DeliveriesPlanned:
			pb := get(rec.Stream)
			if !pb.published {
				pb.tenant, pb.event, pb.eventType = m.GetTenantId(), m.GetEventId(), m.GetEventType()
			}
			if m.GetRepair() != nil {
				pb.repairs++
			} else {
				pb.chunks = max(pb.chunks, m.GetChunks())
				pb.seen = append(pb.seen, m.GetChunk())
			}
			for _, d := range m.GetDeliveries() {
				if _, dup := pb.planned[d.GetEndpointId()]; !dup {
					pb.planned[d.GetEndpointId()] = d
				}
			}
			for _, f := range m.GetFiltered() {
				if _, dup := pb.filtered[f.GetEndpointId()]; !dup {
					pb.filtered[f.GetEndpointId()] = f
				}
			}
		default:
			subs.apply(rec, msg)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}

	var audit *auditor
	if run.Repair {
		audit = r.auditor(run, "plans")
	}
	p.examined(CheckPlans, len(order))
	for _, pb := range order {
		if pb.published {
			p.tenant(pb.tenant).Events++
			p.tenant(pb.tenant).Filtered += int64(len(pb.filtered))
		}
		missing, d := r.checkPlan(p, pb)
		if d == nil || !d.GetRepairable() || audit == nil {
			continue
		}
		if err := r.replan(ctx, run, audit, pb, missing, d); err != nil {
			p.notef("re-plan of %s failed: %v", pb.stream, err)
			continue
		}
		p.repaired(d)
	}
	return p.done(events.PartitionSet{}), nil
}

// checkPlan compares one publication with its snapshot and records what
// differs; it returns the deliveries missing (endpoint → its
// subscription) and the discrepancy that a re-plan repairs, if any. An
// endpoint whose filter did not pass the event is recorded in the plan as
// filtered: it is not missing.
func (r *Reconciler) checkPlan(p *tally, pb *publication) (map[string]subscribed, *controlv1.Discrepancy) {
	base := func(kind, detail string) *controlv1.Discrepancy {
		return &controlv1.Discrepancy{Kind: kind, Check: CheckPlans, TenantId: pb.tenant, EventId: pb.event, Detail: detail}
	}
	if !pb.published {
		d := base(KindPlanOrphan, fmt.Sprintf("%s holds %d planned deliveries and no EventPublished", pb.stream, len(pb.planned)))
		d.Repair = "none: a plan without its event cannot be delivered; look at who wrote the stream"
		p.add(d)
		return nil, nil
	}
	missing := map[string]subscribed{}
	for ep, sub := range pb.expected {
		_, planned := pb.planned[ep]
		_, filtered := pb.filtered[ep]
		if !planned && !filtered {
			missing[ep] = sub
		}
	}
	var fix *controlv1.Discrepancy
	slices.Sort(pb.seen)
	switch {
	case len(missing) == 0 && pb.repairs > 0:
		// Repaired by an earlier run: whatever its own chunks, every
		// endpoint subscribed at publish time is planned.
	case len(pb.seen) == 0 && pb.repairs == 0:
		fix = base(KindPlanMissing, fmt.Sprintf("%s has its EventPublished (at %s) and no DeliveriesPlanned", pb.stream, pb.position))
	case len(pb.seen) > 0 && !complete(pb.seen, pb.chunks):
		fix = base(KindPlanIncomplete, fmt.Sprintf("%s holds chunks %v of the %d its publish wrote", pb.stream, pb.seen, pb.chunks))
	case len(missing) > 0:
		fix = base(KindPlanShort, fmt.Sprintf("%s planned %d deliveries (and filtered out %d endpoints); %d more endpoints were subscribed to %s when it was published (at %s)",
			pb.stream, len(pb.planned), len(pb.filtered), len(missing), pb.eventType, pb.position))
	}
	if fix != nil {
		eps := slices.Sorted(maps.Keys(missing))
		for _, ep := range eps {
			fix.DeliveryIds = append(fix.DeliveryIds, events.DeliveryID(pb.tenant, pb.event, ep))
		}
		if len(eps) == 1 {
			fix.EndpointId = eps[0]
		}
		if len(missing) > 0 {
			fix.Detail += fmt.Sprintf("; missing: endpoints %s", strings.Join(eps, ", "))
			fix.Repair = "re-plan the missing deliveries from the subscriptions recorded at publish time"
			fix.Repairable = true
		} else {
			fix.Repair = "none needed: every endpoint subscribed at publish time is planned"
		}
		p.add(fix)
	}
	for _, ep := range slices.Sorted(maps.Keys(pb.filtered)) {
		f := pb.filtered[ep]
		sub, subscribed := pb.expected[ep]
		switch {
		case !subscribed:
			x := base(KindPlanUnsubscribed, fmt.Sprintf("%s filtered out %s, which was not subscribed to %s at its publish (at %s): the registry lagged the log", pb.stream, ep, pb.eventType, pb.position))
			x.EndpointId, x.Repair = ep, "none: nothing was planned for it"
			p.add(x)
		case sub.cv != f.GetConfigVersion():
			x := base(KindPlanConfigVersion, fmt.Sprintf("%s filtered out %s with its filter of config version %d; version %d was current at its publish (at %s)", pb.stream, ep, f.GetConfigVersion(), sub.cv, pb.position))
			x.EndpointId, x.Repair = ep, "none: the plan records the filter it used; GET /v1/events/{event_id}/routing shows it"
			p.add(x)
		}
	}
	for _, ep := range slices.Sorted(maps.Keys(pb.planned)) {
		d := pb.planned[ep]
		sub, subscribed := pb.expected[ep]
		cv := sub.cv
		switch {
		case d.GetDeliveryId() != events.DeliveryID(pb.tenant, pb.event, ep):
			x := base(KindPlanBadID, fmt.Sprintf("delivery %s to %s is not the delivery id of (%s, %s, %s)", d.GetDeliveryId(), ep, pb.tenant, pb.event, ep))
			x.EndpointId, x.DeliveryIds, x.Repair = ep, []string{d.GetDeliveryId()}, "none: the log is the truth; receivers dedupe on this id"
			p.add(x)
		case !subscribed:
			x := base(KindPlanUnsubscribed, fmt.Sprintf("%s was planned to %s, which was not subscribed to %s at its publish (at %s): the registry lagged the log", pb.stream, ep, pb.eventType, pb.position))
			x.EndpointId, x.DeliveryIds, x.Repair = ep, []string{d.GetDeliveryId()}, "none: a planned delivery is never withdrawn"
			p.add(x)
		case cv != d.GetConfigVersion():
			x := base(KindPlanConfigVersion, fmt.Sprintf("%s was planned to %s at config version %d; version %d was current at its publish (at %s)", pb.stream, ep, d.GetConfigVersion(), cv, pb.position))
			x.EndpointId, x.DeliveryIds, x.Repair = ep, []string{d.GetDeliveryId()}, "none: attempts use the endpoint's current configuration anyway"
			p.add(x)
		}
	}
	return missing, fix
}

// filterInput reads the EventPublished of an event stream, for the
// filters of a re-plan, and returns its payload's seal.
func (r *Reconciler) filterInput(ctx context.Context, stream string) (*filter.Input, *hooklinev1.PayloadSeal, error) {
	rec, err := readOne(ctx, r.cfg.Log, stream, events.Forwards, 0)
	if err != nil {
		return nil, nil, err
	}
	msg, err := events.Decode(rec)
	if err != nil {
		return nil, nil, err
	}
	pub, ok := msg.(*hooklinev1.EventPublished)
	if !ok {
		return nil, nil, fmt.Errorf("%s starts with %s, not EventPublished", stream, rec.Type)
	}
	if pub, err = r.cfg.Payloads.OpenEvent(ctx, pub); err != nil {
		return nil, nil, err
	}
	return filter.NewInput(filter.EventOf(pub)), pub.GetPayloadSeal(), nil
}

// complete reports whether sorted seen is exactly 0..chunks-1.
func complete(seen []int32, chunks int32) bool {
	if int32(len(seen)) != chunks {
		return false
	}
	for i, c := range seen {
		if c != int32(i) {
			return false
		}
	}
	return true
}

// replan appends the missing deliveries of pb to its event stream, from
// the snapshot (never from today's registry), skipping any delivery whose
// stream exists (it was attempted: planning it again would make a second
// logical delivery), and records the repair.
func (r *Reconciler) replan(ctx context.Context, run Run, audit *auditor, pb *publication, missing map[string]subscribed, d *controlv1.Discrepancy) error {
	planned, filtered, err := r.replanned(ctx, pb, missing)
	if err != nil {
		return err
	}
	if len(planned) == 0 && len(filtered) == 0 {
		return errors.New("every missing delivery already has a delivery stream: not planned again")
	}
	last, err := readOne(ctx, r.cfg.Log, pb.stream, events.Backwards, events.End)
	if err != nil {
		return err
	}
	issuedBy := run.IssuedBy
	if issuedBy == nil {
		issuedBy = system
	}
	repair := &hooklinev1.PlanRepair{RunId: run.ID, Reason: d.GetKind() + ": " + d.GetDetail(),
		PublishedCommit: pb.position.Commit, PublishedPrepare: pb.position.Prepare, IssuedBy: issuedBy}
	evs, err := r.planEvents(run, pb, repair, events.ChunkPlan(planned, filtered))
	if err != nil {
		return err
	}
	if _, err := r.cfg.Log.Append(ctx, pb.stream, events.Exact(last.Revision), evs...); err != nil {
		return fmt.Errorf("append to %s: %w", pb.stream, err)
	}
	ids := make([]string, len(planned))
	for i, d := range planned {
		ids[i] = d.GetDeliveryId()
	}
	r.cfg.Logger.Info("reconcile re-planned deliveries", "run_id", run.ID, "stream", pb.stream, "deliveries", len(ids), "filtered", len(filtered))
	return audit.record(ctx, &hooklinev1.ReconcileRepaired{
		Kind: hooklinev1.ReconcileRepaired_KIND_REPLANNED, Reason: repair.GetReason(),
		TenantId: pb.tenant, EventId: pb.event, EndpointId: d.GetEndpointId(), DeliveryIds: ids,
	})
}

// replanned decides, for each missing delivery of pb without a delivery
// stream, whether it is planned or filtered out: by the endpoint's filter
// of the publish's time, on the event as published.
func (r *Reconciler) replanned(ctx context.Context, pb *publication, missing map[string]subscribed) ([]*hooklinev1.PlannedDelivery, []*hooklinev1.FilteredEndpoint, error) {
	var planned []*hooklinev1.PlannedDelivery
	var filtered []*hooklinev1.FilteredEndpoint
	var in *filter.Input
	var under *hooklinev1.PayloadSeal // the payload's seal, which its filters' errors are sealed under
	for _, ep := range slices.Sorted(maps.Keys(missing)) {
		sub := missing[ep]
		id := events.DeliveryID(pb.tenant, pb.event, ep)
		last, err := lastPosition(ctx, r.cfg.Log, events.DeliveryStream(id))
		if err != nil {
			return nil, nil, err
		}
		if !last.IsStart() {
			continue
		}
		pd := &hooklinev1.PlannedDelivery{DeliveryId: id, EndpointId: ep, ConfigVersion: sub.cv}
		if pb.orderingKey != "" {
			pd.Ordering = sub.ordering
		}
		if sub.filter != "" {
			if in == nil {
				if in, under, err = r.filterInput(ctx, pb.stream); errors.Is(err, seal.ErrErased) {
					// Erased: no filter can pass it, and a delivery of it
					// would only end erased.
					filtered = append(filtered, &hooklinev1.FilteredEndpoint{EndpointId: ep, ConfigVersion: sub.cv, Error: "the payload was erased"})
					in = nil
					continue
				} else if err != nil {
					return nil, nil, err
				}
			}
			passed := false
			f, err := filter.Compile(sub.filter)
			if err == nil {
				passed, err = f.Match(in)
			}
			if !passed {
				fe := []*hooklinev1.FilteredEndpoint{{EndpointId: ep, ConfigVersion: sub.cv}}
				if err != nil {
					// It may quote the payload: sealed with it.
					fe[0].Error = err.Error()
					if fe, err = r.cfg.Payloads.SealFiltered(ctx, pb.tenant, pb.event, under, fe); err != nil {
						return nil, nil, err
					}
				}
				filtered = append(filtered, fe...)
				continue
			}
			pd.FilterPassed = true
		}
		planned = append(planned, pd)
	}
	return planned, filtered, nil
}

// planEvents encodes the chunks of a re-plan of pb as DeliveriesPlanned
// events, each in its partition, with ids of the run.
func (r *Reconciler) planEvents(run Run, pb *publication, repair *hooklinev1.PlanRepair, chunks []events.PlanChunk) ([]events.Event, error) {
	now := r.cfg.Now()
	evs := make([]events.Event, 0, len(chunks))
	for i, c := range chunks {
		dp := &hooklinev1.DeliveriesPlanned{
			TenantId: pb.tenant, EventId: pb.event, EventType: pb.eventType, Deliveries: c.Deliveries, Filtered: c.Filtered,
			Chunk: int32(i), Chunks: int32(len(chunks)), At: timestamppb.New(now),
			ExpiresAt: timestamppb.New(now.Add(r.cfg.Deadline)), Repair: repair, OrderingKey: pb.orderingKey,
		}
		ev, err := events.EncodeIn(dp, fmt.Sprintf("replan/%s/%d", run.ID, i), pb.stream, c.Partition)
		if err != nil {
			return nil, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}
