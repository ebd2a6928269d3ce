package control

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/eventtype"
	"github.com/hookline/hookline/filter"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// routingReads bounds the endpoint streams one explanation reads at once.
const routingReads = 8

// ExplainRouting answers, for every endpoint of the tenant, what the
// publish of one event decided for it and why. Everything comes from the
// log: the event's stream (its EventPublished, the plan's chunks, repairs
// included) and each endpoint's stream folded up to the EventPublished's
// position; a filter's values are those of the recorded event read by the
// expression of the recorded config version. Today's configuration plays
// no part.
func (s *Server) ExplainRouting(ctx context.Context, req *controlv1.ExplainRoutingRequest) (*controlv1.EventRouting, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if err := checkEventID(req.GetEventId()); err != nil {
		return nil, toStatus(err)
	}
	out, err := s.explainRouting(ctx, tenantID, req.GetEventId())
	return out, toStatus(err)
}

// plannedEntry is one endpoint's entry in the plan.
type plannedEntry struct {
	d      *hooklinev1.PlannedDelivery
	repair string // the reconcile run that planned it, if a repair did
}

func (s *Server) explainRouting(ctx context.Context, tenantID, eventID string) (*controlv1.EventRouting, error) {
	stream := events.EventStream(tenantID, eventID)
	recs, err := s.cfg.Log.ReadStream(ctx, stream, events.Forwards, 0, 1+maxChunks)
	archived := false
	if errors.Is(err, events.ErrStreamNotFound) && s.cfg.Archive != nil {
		recs, err = s.cfg.Archive.ReadStream(ctx, stream)
		archived = true
	}
	if errors.Is(err, events.ErrStreamNotFound) {
		return nil, status.Errorf(codes.NotFound, "event_id %q: no such event for this tenant (events are kept 30 days, or the node's retention, and no archive holds it)", eventID)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	var pub *hooklinev1.EventPublished
	var at events.Position
	planned := map[string]plannedEntry{}
	filtered := map[string]*hooklinev1.FilteredEndpoint{}
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			return nil, err
		}
		switch m := msg.(type) {
		case *hooklinev1.EventPublished:
			pub, at = m, recs[i].Position
		case *hooklinev1.DeliveriesPlanned:
			for _, d := range m.GetDeliveries() {
				if _, dup := planned[d.GetEndpointId()]; !dup {
					planned[d.GetEndpointId()] = plannedEntry{d: d, repair: m.GetRepair().GetRunId()}
				}
			}
			for _, f := range m.GetFiltered() {
				if _, dup := filtered[f.GetEndpointId()]; !dup {
					filtered[f.GetEndpointId()] = f
				}
			}
		}
	}
	if pub == nil {
		return nil, status.Errorf(codes.NotFound, "event_id %q: its stream holds no EventPublished", eventID)
	}
	// The verdicts evaluate filters on the payload: an erased one leaves
	// nothing to explain them with.
	if pub, err = s.cfg.Payloads.OpenEvent(ctx, pub); errors.Is(err, seal.ErrErased) {
		return nil, erasedError(fmt.Sprintf("the payload of event %s, which routing explanations read,", eventID))
	} else if err != nil {
		return nil, fmt.Errorf("event %s: %w", eventID, err)
	}
	if err := s.openFiltered(ctx, pub, filtered); err != nil {
		return nil, err
	}
	ids, err := s.cfg.Registry.TenantEndpointIDs(tenantID)
	if err != nil {
		return nil, err
	}
	all := map[string]bool{}
	for _, id := range ids {
		all[id] = true
	}
	for id := range planned {
		all[id] = true
	}
	for id := range filtered {
		all[id] = true
	}
	order := slices.Sorted(maps.Keys(all))
	in := filter.NewInput(filter.EventOf(pub))
	verdicts := make([]*controlv1.RoutingVerdict, len(order))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(routingReads)
	for i, id := range order {
		g.Go(func() error {
			h, err := s.endpointAt(gctx, id, at)
			if err != nil {
				return err
			}
			if h.tenant != "" && h.tenant != tenantID {
				return nil // not this tenant's: never shown
			}
			verdicts[i] = verdict(id, pub, h, planned, filtered, in)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := &controlv1.EventRouting{
		EventId: eventID, EventType: pub.GetEventType(), PublishedAt: pub.GetAt(),
		Position: at.String(), Headers: pub.GetHeaders(), FromArchive: archived,
	}
	if out.Schema, err = s.schemaAt(ctx, pub, at); err != nil {
		return nil, err
	}
	for _, v := range verdicts {
		if v != nil {
			out.Endpoints = append(out.Endpoints, v)
		}
	}
	return out, nil
}

// openFiltered opens, in place, the filters' errors that the plan sealed
// with the payload.
func (s *Server) openFiltered(ctx context.Context, pub *hooklinev1.EventPublished, filtered map[string]*hooklinev1.FilteredEndpoint) error {
	for id, f := range filtered {
		opened, erased, err := s.cfg.Payloads.OpenFiltered(ctx, pub.GetTenantId(), pub.GetEventId(), []*hooklinev1.FilteredEndpoint{f})
		if err == nil && erased {
			err = erasedError(fmt.Sprintf("the payload of event %s, which routing explanations read,", pub.GetEventId()))
		}
		if err != nil {
			return err
		}
		filtered[id] = opened[0]
	}
	return nil
}

// endpointHistory is one endpoint's stream as an explanation needs it.
type endpointHistory struct {
	tenant string
	// then is the endpoint folded up to the publish's position.
	then endpoint.State
	// createdAt is when it was created (zero if never).
	createdAt time.Time
	// configs are its configurations by config version, over its whole
	// stream.
	configs map[int64]*hooklinev1.EndpointConfig
	// deletedAt is when it was deleted, if before the publish.
	deletedAt time.Time
}

// endpointAt reads an endpoint's whole stream: its state at pos, its
// configurations by version.
func (s *Server) endpointAt(ctx context.Context, id string, pos events.Position) (*endpointHistory, error) {
	h := &endpointHistory{configs: map[int64]*hooklinev1.EndpointConfig{}}
	m := moment{pos: events.Position{Commit: ^uint64(0), Prepare: ^uint64(0)}, byPos: true}
	_, _, err := s.foldStream(ctx, events.EndpointStream(id), m, func(r *events.Record, msg proto.Message) {
		switch e := msg.(type) {
		case *hooklinev1.EndpointCreated:
			if h.createdAt.IsZero() {
				h.tenant, h.createdAt = e.GetTenantId(), r.Recorded
			}
			h.configs[e.GetConfigVersion()] = e.GetConfig()
		case *hooklinev1.EndpointUpdated:
			h.configs[e.GetConfigVersion()] = e.GetConfig()
		}
		if !pos.Less(r.Position) {
			h.then.Apply(msg)
			if _, ok := msg.(*hooklinev1.EndpointDeleted); ok {
				h.deletedAt = r.Recorded
			}
		}
	})
	return h, err
}

// verdict decides one endpoint's verdict from the plan and its history.
func verdict(id string, pub *hooklinev1.EventPublished, h *endpointHistory, planned map[string]plannedEntry, filtered map[string]*hooklinev1.FilteredEndpoint, in *filter.Input) *controlv1.RoutingVerdict {
	typ := pub.GetEventType()
	v := &controlv1.RoutingVerdict{EndpointId: id}
	config := func(cv int64) *hooklinev1.EndpointConfig {
		if c, ok := h.configs[cv]; ok {
			return c
		}
		return h.then.Config
	}
	describe := func(cv int64) *hooklinev1.EndpointConfig {
		c := config(cv)
		v.ConfigVersion, v.EventTypes, v.Filter = cv, slices.Clone(c.GetEventTypes()), c.GetFilter()
		v.MatchedBy, _ = eventtype.Match(c.GetEventTypes(), typ)
		return c
	}
	if p, ok := planned[id]; ok {
		describe(p.d.GetConfigVersion())
		v.DeliveryId = p.d.GetDeliveryId()
		v.Verdict = controlv1.RoutingVerdict_VERDICT_PLANNED
		v.Reason = fmt.Sprintf("planned at config version %d: subscribed to %s", v.ConfigVersion, subscribedBy(typ, v.MatchedBy))
		if p.d.GetFilterPassed() {
			v.Reason += ", and its filter passed the event"
			explain(v, in)
		}
		if h.then.Status == controlv1.Endpoint_STATUS_PAUSED {
			v.Verdict = controlv1.RoutingVerdict_VERDICT_PAUSED
			v.Reason += "; held: the endpoint was paused when the event was published, and is delivered once it resumes"
		}
		if p.repair != "" {
			v.RepairRun = p.repair
			v.Reason += fmt.Sprintf("; planned by reconcile run %s, as the publish's own plan had missed it", p.repair)
		}
		return v
	}
	if f, ok := filtered[id]; ok {
		describe(f.GetConfigVersion())
		v.Verdict = controlv1.RoutingVerdict_VERDICT_FILTERED_OUT
		v.Reason = fmt.Sprintf("subscribed to %s at config version %d, and its filter did not pass the event", subscribedBy(typ, v.MatchedBy), v.ConfigVersion)
		explain(v, in)
		if f.GetError() != "" {
			v.FilterError = f.GetError()
			v.Reason = fmt.Sprintf("subscribed to %s at config version %d, and its filter gave no true or false on the event (%s), which counts as not passed", subscribedBy(typ, v.MatchedBy), v.ConfigVersion, f.GetError())
		}
		return v
	}
	then := &h.then
	switch {
	case !then.Created:
		v.Verdict = controlv1.RoutingVerdict_VERDICT_CREATED_LATER
		v.Reason = "the endpoint did not exist yet when the event was published"
		if !h.createdAt.IsZero() {
			v.Reason = fmt.Sprintf("created at %s, after the event was published", h.createdAt.UTC().Format(time.RFC3339))
		}
		return v
	case then.Deleted:
		describe(then.ConfigVersion)
		v.Verdict = controlv1.RoutingVerdict_VERDICT_DELETED
		v.Reason = fmt.Sprintf("deleted at %s, before the event was published", h.deletedAt.UTC().Format(time.RFC3339))
		return v
	case then.Status == controlv1.Endpoint_STATUS_DISABLED:
		describe(then.ConfigVersion)
		v.Verdict = controlv1.RoutingVerdict_VERDICT_DISABLED
		v.Reason = "disabled when the event was published: a disabled endpoint is planned for no event"
		return v
	}
	c := describe(then.ConfigVersion)
	if v.MatchedBy == "" {
		v.Verdict = controlv1.RoutingVerdict_VERDICT_NOT_SUBSCRIBED
		v.Reason = fmt.Sprintf("its event types at config version %d (%s) did not match %s", v.ConfigVersion, strings.Join(c.GetEventTypes(), ", "), typ)
		if slices.Contains(c.GetEventTypes(), eventtype.All) && strings.HasPrefix(typ, eventtype.Reserved) {
			v.Reason += fmt.Sprintf(": * leaves out Hookline's operational types, which go only to endpoints that name them or %s*", eventtype.Reserved)
		}
		return v
	}
	v.Verdict = controlv1.RoutingVerdict_VERDICT_NOT_PLANNED
	v.Reason = fmt.Sprintf("subscribed to %s at the publish's position in the log (config version %d), and the plan lacks it: the publishing node's registry had not seen it yet; hookline reconcile reports it as plan_short, and --repair plans it", subscribedBy(typ, v.MatchedBy), v.ConfigVersion)
	return v
}

// subscribedBy says how an endpoint subscribed to typ: by its name, or
// through the pattern entry that matched it (eventtype's rule, the one
// publish planned by).
func subscribedBy(typ, entry string) string {
	if entry == "" || entry == typ {
		return typ
	}
	return typ + " through " + entry
}

// explain evaluates v's filter on the event, for the values it read.
func explain(v *controlv1.RoutingVerdict, in *filter.Input) {
	if v.GetFilter() == "" {
		return
	}
	f, err := filter.Compile(v.GetFilter())
	if err != nil {
		v.FilterError = err.Error()
		return
	}
	ex := f.Explain(in)
	v.FilterError = ex.Err
	for _, val := range ex.Values {
		v.FilterValues = append(v.FilterValues, &controlv1.FilterValue{Expr: val.Expr, Value: val.Value, Error: val.Err})
	}
}
