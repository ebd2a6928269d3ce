package reconcile

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/eventtype"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// endpointTypes are the endpoint stream's events that subscriptions follow.
var endpointTypes = []string{
	"EndpointCreated", "EndpointUpdated", "EndpointPaused", "EndpointResumed", "EndpointDisabled", "EndpointDeleted",
	"CircuitOpened", "CircuitHalfOpened", "CircuitClosed",
}

// subscriptions are the endpoints as the log has them at the position of
// the last record applied: applied in log order, they answer who was
// subscribed at any position, which is the snapshot a publish at that
// position plans from. It follows the registry's rules (registry.Apply):
// a repeated creation changes nothing, a resume clears both pause and
// disable, and publish plans to endpoints neither deleted nor disabled,
// paused ones included.
type subscriptions struct {
	endpoints map[string]*subscriber
	byTenant  map[string][]*subscriber // in creation order
}

// subscriber is one endpoint's state.
type subscriber struct {
	id, tenant string
	cv         int64
	filter     string                 // the endpoint's filter at cv, "" for none
	ordering   hooklinev1.KeyOrdering // at cv
	// entries are its event types as eventtype.Entries reads them:
	// sorted, "*" alone for every type.
	entries  []string
	paused   bool
	disabled bool
	deleted  bool
	// circuit is the breaker's last transition ("" none, open, half_open,
	// closed) and openUntil the end of its last open period.
	circuit   string
	openUntil time.Time
	// last is the position of the endpoint stream's last record applied.
	last events.Position
}

func newSubscriptions() *subscriptions {
	return &subscriptions{endpoints: map[string]*subscriber{}, byTenant: map[string][]*subscriber{}}
}

// apply folds one record of an endpoint stream.
func (s *subscriptions) apply(rec *events.Record, msg proto.Message) {
	if c, ok := msg.(*hooklinev1.EndpointCreated); ok {
		if _, exists := s.endpoints[c.GetEndpointId()]; exists {
			return
		}
		e := &subscriber{id: c.GetEndpointId(), tenant: c.GetTenantId(), cv: c.GetConfigVersion(), filter: c.GetConfig().GetFilter(), ordering: c.GetConfig().GetOrdering(), last: rec.Position}
		e.setTypes(c.GetConfig().GetEventTypes())
		s.endpoints[e.id] = e
		s.byTenant[e.tenant] = append(s.byTenant[e.tenant], e)
		return
	}
	// Every other type of endpointTypes names its endpoint.
	m, ok := msg.(interface{ GetEndpointId() string })
	if !ok {
		return
	}
	e := s.endpoints[m.GetEndpointId()]
	if e == nil {
		return // an event for an endpoint never created changes nothing
	}
	e.last = rec.Position
	switch m := msg.(type) {
	case *hooklinev1.EndpointUpdated:
		e.cv, e.filter, e.ordering = m.GetConfigVersion(), m.GetConfig().GetFilter(), m.GetConfig().GetOrdering()
		e.setTypes(m.GetConfig().GetEventTypes())
	case *hooklinev1.EndpointPaused:
		e.paused = true
	case *hooklinev1.EndpointResumed:
		e.paused, e.disabled = false, false
	case *hooklinev1.EndpointDisabled:
		e.disabled = true
	case *hooklinev1.EndpointDeleted:
		e.deleted = true
	case *hooklinev1.CircuitOpened:
		e.circuit, e.openUntil = "open", asTime(m.GetUntil())
	case *hooklinev1.CircuitHalfOpened:
		e.circuit = "half_open"
	case *hooklinev1.CircuitClosed:
		e.circuit = "closed"
	}
}

func (e *subscriber) setTypes(types []string) { e.entries = eventtype.Entries(types) }

// subscribes reports whether e would be planned now for an event of a
// type that patterns match: patterns are eventtype.Patterns of the type,
// the rule the registry plans by.
func (e *subscriber) subscribes(patterns []string) bool {
	if e.deleted || e.disabled {
		return false
	}
	return slices.ContainsFunc(patterns, func(p string) bool {
		_, found := slices.BinarySearch(e.entries, p)
		return found
	})
}

// subscribed is an endpoint's subscription at a publish: its config
// version and its filter then.
type subscribed struct {
	cv       int64
	filter   string
	ordering hooklinev1.KeyOrdering
}

// snapshot returns the endpoints of tenant subscribed to eventType now,
// with their config versions and filters.
func (s *subscriptions) snapshot(tenant, eventType string) map[string]subscribed {
	var out map[string]subscribed
	patterns := eventtype.Patterns(eventType)
	for _, e := range s.byTenant[tenant] {
		if e.subscribes(patterns) {
			if out == nil {
				out = map[string]subscribed{}
			}
			out[e.id] = subscribed{cv: e.cv, filter: e.filter, ordering: e.ordering}
		}
	}
	return out
}

// asTime converts a timestamp, nil to the zero time.
func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
