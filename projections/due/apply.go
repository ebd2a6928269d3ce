package due

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Filter implements [projections.Projection].
func (*Due) Filter() events.Filter {
	return events.Filter{
		StreamPrefixes: []string{
			events.EventCategory + "-", events.DeliveryCategory + "-", events.OrderingCategory + "-",
			events.TenantCategory + "-", events.EndpointCategory + "-",
		},
		Types: []string{
			"DeliveriesPlanned", "AttemptSucceeded", "AttemptFailed", "DeliveryExpired", "ReplayRequested", "OrderingKeySkipped",
			"OrderingCheckpointed", "TenantErased", "EndpointDeleted",
		},
	}
}

// Name implements [projections.Projection].
func (*Due) Name() string { return Name }

// Apply implements [projections.Projection]. The index follows the owning
// grain's decisions; it never decides a delivery's fate itself:
//
//   - DeliveriesPlanned adds each delivery as new work, due at the planned
//     time;
//   - AttemptSucceeded, DeliveryExpired and a terminal AttemptFailed (no
//     next_attempt_at) remove it;
//   - AttemptFailed with next_attempt_at moves it to a retry due then;
//   - ReplayRequested makes it due at the request time as a manual retry:
//     an ended delivery comes back for one attempt (whose outcome the grain
//     records, usually without next_attempt_at: it stays ended unless that
//     attempt succeeds), and a pending one due later moves up. A pending
//     delivery already due is left as it is.
//
// Attempts with a sequence, OrderingCheckpointed, TenantErased and
// EndpointDeleted keep the counts of ordered keys' sequences (order_counter.go).
func (d *Due) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	return d.apply.apply(b, rec, msg)
}

// applier applies the events to the index: the items through the item
// store, ordering keys' turns through the ordering, sequences through the
// counter. Only the runner's goroutine uses it.
type applier struct {
	items   *itemStore
	order   *ordering
	counts  *counter
	watches *watches
	changes *changes
}

func (a *applier) apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	switch m := msg.(type) {
	case *hooklinev1.DeliveriesPlanned:
		return a.planned(b, m, rec.Position)
	case *hooklinev1.AttemptSucceeded:
		return a.succeeded(b, m.GetAttempt())
	case *hooklinev1.DeliveryExpired:
		return a.expired(b, m)
	case *hooklinev1.AttemptFailed:
		return a.failed(b, m)
	case *hooklinev1.OrderingKeySkipped:
		return a.order.skipped(b, m)
	case *hooklinev1.OrderingCheckpointed:
		return a.counts.checkpointed(b, m)
	case *hooklinev1.TenantErased:
		return a.counts.tenantErased(b, m)
	case *hooklinev1.EndpointDeleted:
		return a.counts.endpointDeleted(b, m)
	case *hooklinev1.ReplayRequested:
		return a.replayed(b, m)
	}
	return nil
}

// planned adds a plan's deliveries, whose plan is at pos in the log.
func (a *applier) planned(b *projections.Batch, m *hooklinev1.DeliveriesPlanned, pos events.Position) error {
	// A delivery is planned once (its event stream is appended with
	// expected revision NoStream), unless its event stream expired and
	// the event was published again: then it replaces the old item, so
	// that every key is set once between deletes (see item_store.go).
	// The check is a lookup that misses for all but those: the filter of
	// the index's deliveries answers most of them.
	if err := a.items.prepareSeen(b); err != nil {
		return err
	}
	for _, it := range PlannedItems(m) {
		if a.items.mayHold(it.DeliveryID) {
			if _, err := a.items.remove(b, it.DeliveryID); err != nil {
				return err
			}
		}
		if err := a.order.plan(b, it, pos); err != nil {
			return err
		}
	}
	return nil
}

// succeeded removes a delivery that succeeded, and moves its key on.
func (a *applier) succeeded(b *projections.Batch, at *hooklinev1.Attempt) error {
	a.outcome(b, at.GetEndpointId(), at.GetDeliveryId())
	if err := a.counts.sent(b, at); err != nil {
		return err
	}
	it, err := a.items.remove(b, at.GetDeliveryId())
	if err != nil {
		return err
	}
	// A replay of a parked head carries its key in the attempt only.
	if key := at.GetOrderingKey(); key != "" && it.OrderingKey == "" {
		it.EndpointID, it.OrderingKey, it.DeliveryID = at.GetEndpointId(), key, at.GetDeliveryId()
	}
	return a.order.itemEnded(b, it, false, asTime(at.GetFinishedAt()))
}

// expired removes a delivery that expired, and moves its key on.
func (a *applier) expired(b *projections.Batch, m *hooklinev1.DeliveryExpired) error {
	a.outcome(b, m.GetEndpointId(), m.GetDeliveryId())
	it, err := a.items.remove(b, m.GetDeliveryId())
	if err != nil {
		return err
	}
	return a.order.itemEnded(b, it, true, asTime(m.GetAt()))
}

// failed removes a delivery whose attempt failed for good, and moves its
// key on; one with a next attempt becomes a retry due then.
func (a *applier) failed(b *projections.Batch, m *hooklinev1.AttemptFailed) error {
	at := m.GetAttempt()
	a.outcome(b, at.GetEndpointId(), at.GetDeliveryId())
	if err := a.counts.sent(b, at); err != nil {
		return err
	}
	if m.GetNextAttemptAt() == nil {
		it, err := a.items.remove(b, at.GetDeliveryId())
		if err != nil {
			return err
		}
		return a.order.itemEnded(b, it, true, asTime(at.GetFinishedAt()))
	}
	it, ok, err := a.items.lookup(b, at.GetDeliveryId())
	if err != nil {
		return err
	}
	if ok {
		if it.Waiting {
			return nil // a manual attempt of a delivery behind its key's head
		}
		if err := a.items.delete(b, it); err != nil {
			return err
		}
		if it.Ordered() {
			if err := a.order.blocked(b, &it, asTime(at.GetFinishedAt())); err != nil {
				return err
			}
		}
	} else {
		it = Item{
			DeliveryID: at.GetDeliveryId(), TenantID: at.GetTenantId(), EventID: at.GetEventId(),
			EventType: at.GetEventType(), EndpointID: at.GetEndpointId(), ConfigVersion: at.GetConfigVersion(),
		}
	}
	it.Class, it.Manual, it.DueAt, it.Attempts = ClassRetry, false, asTime(m.GetNextAttemptAt()), at.GetNumber()
	if it.Ordered() && at.GetSequence() > 0 {
		it.Sequence = at.GetSequence()
	}
	return a.items.put(b, it)
}

// replayed makes a delivery due at the request time as a manual retry,
// unless it is due already or waits for its key's turn.
func (a *applier) replayed(b *projections.Batch, m *hooklinev1.ReplayRequested) error {
	at := asTime(m.GetAt())
	it, ok, err := a.items.lookup(b, m.GetDeliveryId())
	if err != nil {
		return err
	}
	if ok {
		if it.Waiting || it.Class == ClassNew || !it.DueAt.After(at) {
			return nil // already due, or due in its key's turn
		}
		if err := a.items.delete(b, it); err != nil {
			return err
		}
	} else {
		it = Item{DeliveryID: m.GetDeliveryId(), TenantID: m.GetTenantId(), EventID: m.GetEventId(), EndpointID: m.GetEndpointId()}
	}
	it.Class, it.Manual, it.DueAt = ClassRetry, true, at
	return a.items.put(b, it)
}

// outcome notes an outcome of deliveryID at endpointID: a watched one
// wakes the endpoint once the batch commits.
func (a *applier) outcome(b *projections.Batch, endpointID, deliveryID string) {
	if a.watches.take(deliveryID) && endpointID != "" {
		a.changes.watch(b, endpointID)
	}
}

// PlannedItems returns the deliveries of a plan as the index holds them
// once it has applied it: new work, due at the planned time. The publish
// path hands the same items to the endpoint grains of its node at once
// (see actors/endpoint's Planned), before the index has them; it leaves
// out the ordered ones, whose turn only the index knows.
func PlannedItems(m *hooklinev1.DeliveriesPlanned) []Item {
	items := make([]Item, 0, len(m.GetDeliveries()))
	for _, p := range m.GetDeliveries() {
		items = append(items, Item{
			DeliveryID: p.GetDeliveryId(), TenantID: m.GetTenantId(), EventID: m.GetEventId(),
			EventType: m.GetEventType(), EndpointID: p.GetEndpointId(), ConfigVersion: p.GetConfigVersion(),
			Class: ClassNew, DueAt: asTime(m.GetAt()), PlannedAt: asTime(m.GetAt()), ExpiresAt: asTime(m.GetExpiresAt()),
		})
		if o := p.GetOrdering(); o != hooklinev1.KeyOrdering_KEY_ORDERING_NONE && m.GetOrderingKey() != "" {
			items[len(items)-1].Ordering, items[len(items)-1].OrderingKey = o, m.GetOrderingKey()
		}
	}
	return items
}

// asTime converts a timestamp, nil to the zero time.
func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
