package due

import (
	"encoding/binary"
	"fmt"
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
	switch m := msg.(type) {
	case *hooklinev1.DeliveriesPlanned:
		// A delivery is planned once (its event stream is appended with
		// expected revision NoStream), unless its event stream expired and
		// the event was published again: then it replaces the old item,
		// so that every key is set once between deletes (see put).
		// The check is a lookup that misses for all but those: the
		// filter of the index's keys answers most of them.
		if d.seen.stale() {
			if err := d.seen.build(b); err != nil {
				return fmt.Errorf("due index: build the filter of its deliveries: %w", err)
			}
		}
		for _, it := range PlannedItems(m) {
			if d.seen.mayHave(reverseKey(it.DeliveryID)) {
				if _, err := d.remove(b, it.DeliveryID); err != nil {
					return err
				}
			}
			if err := d.plan(b, it, rec.Position); err != nil {
				return err
			}
		}
	case *hooklinev1.AttemptSucceeded:
		a := m.GetAttempt()
		d.outcome(b, a.GetEndpointId(), a.GetDeliveryId())
		if err := d.sent(b, a); err != nil {
			return err
		}
		it, err := d.remove(b, a.GetDeliveryId())
		if err != nil {
			return err
		}
		// A replay of a parked head carries its key in the attempt only.
		if key := a.GetOrderingKey(); key != "" && it.OrderingKey == "" {
			it.EndpointID, it.OrderingKey, it.DeliveryID = a.GetEndpointId(), key, a.GetDeliveryId()
		}
		return d.endedItem(b, it, false, asTime(a.GetFinishedAt()))
	case *hooklinev1.DeliveryExpired:
		d.outcome(b, m.GetEndpointId(), m.GetDeliveryId())
		it, err := d.remove(b, m.GetDeliveryId())
		if err != nil {
			return err
		}
		return d.endedItem(b, it, true, asTime(m.GetAt()))
	case *hooklinev1.AttemptFailed:
		a := m.GetAttempt()
		d.outcome(b, a.GetEndpointId(), a.GetDeliveryId())
		if err := d.sent(b, a); err != nil {
			return err
		}
		if m.GetNextAttemptAt() == nil {
			it, err := d.remove(b, a.GetDeliveryId())
			if err != nil {
				return err
			}
			return d.endedItem(b, it, true, asTime(a.GetFinishedAt()))
		}
		it, ok, err := d.lookup(b, a.GetDeliveryId())
		if err != nil {
			return err
		}
		if ok {
			if it.Waiting {
				return nil // a manual attempt of a delivery behind its key's head
			}
			if err := d.delete(b, it); err != nil {
				return err
			}
			if it.Ordered() {
				if err := d.blocked(b, &it, asTime(a.GetFinishedAt())); err != nil {
					return err
				}
			}
		} else {
			it = Item{
				DeliveryID: a.GetDeliveryId(), TenantID: a.GetTenantId(), EventID: a.GetEventId(),
				EventType: a.GetEventType(), EndpointID: a.GetEndpointId(), ConfigVersion: a.GetConfigVersion(),
			}
		}
		it.Class, it.Manual, it.DueAt, it.Attempts = ClassRetry, false, asTime(m.GetNextAttemptAt()), a.GetNumber()
		if it.Ordered() && a.GetSequence() > 0 {
			it.Sequence = a.GetSequence()
		}
		return d.put(b, it)
	case *hooklinev1.OrderingKeySkipped:
		return d.skipped(b, m)
	case *hooklinev1.OrderingCheckpointed:
		return d.checkpointed(b, m)
	case *hooklinev1.TenantErased:
		return d.tenantErased(b, m)
	case *hooklinev1.EndpointDeleted:
		return d.endpointDeleted(b, m)
	case *hooklinev1.ReplayRequested:
		at := asTime(m.GetAt())
		it, ok, err := d.lookup(b, m.GetDeliveryId())
		if err != nil {
			return err
		}
		if ok {
			if it.Waiting || it.Class == ClassNew || !it.DueAt.After(at) {
				return nil // already due, or due in its key's turn
			}
			if err := d.delete(b, it); err != nil {
				return err
			}
		} else {
			it = Item{DeliveryID: m.GetDeliveryId(), TenantID: m.GetTenantId(), EventID: m.GetEventId(), EndpointID: m.GetEndpointId()}
		}
		it.Class, it.Manual, it.DueAt = ClassRetry, true, at
		return d.put(b, it)
	}
	return nil
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

// put writes it and its reverse entry, and marks its endpoint touched. The
// delivery must not be in the index (deleted first when it moves): each
// item key and reverse entry is set once and then single-deleted, so that a
// delivery that comes and goes within seconds leaves nothing on disk, not
// even a tombstone.
func (d *Due) put(b *projections.Batch, it Item) error {
	d.buf = encodeItem(d.buf[:0], &it) // the batch copies it
	v := d.buf
	k := it.storeKey()
	if err := b.Set(k, v); err != nil {
		return err
	}
	rk := reverseKey(it.DeliveryID)
	if err := b.Set(rk, k); err != nil {
		return err
	}
	d.seen.add(rk)
	d.recent.Put(it.DeliveryID, it)
	if it.Waiting {
		return nil // not due: the endpoint's work is unchanged
	}
	d.touch(b, it.EndpointID, &it)
	return nil
}

// delete removes it's item key and reverse entry (see put).
func (d *Due) delete(b *projections.Batch, it Item) error {
	d.recent.Forget(it.DeliveryID)
	if !it.Waiting {
		d.touch(b, it.EndpointID, nil)
	}
	if err := b.SingleDelete(it.storeKey()); err != nil {
		return err
	}
	return b.SingleDelete(reverseKey(it.DeliveryID))
}

// remove drops a delivery, if it is in the index, and returns its item
// (the zero Item when it was not there).
func (d *Due) remove(b *projections.Batch, deliveryID string) (Item, error) {
	it, ok, err := d.lookup(b, deliveryID)
	if err != nil || !ok {
		return Item{}, err
	}
	return it, d.delete(b, it)
}

// endedItem moves the key of an ordered delivery that ended on; failed
// says it ended without success.
func (d *Due) endedItem(b *projections.Batch, it Item, failed bool, at time.Time) error {
	if it.OrderingKey == "" || it.Waiting {
		return nil
	}
	park := failed && it.Ordering == hooklinev1.KeyOrdering_KEY_ORDERING_PARK
	return d.ended(b, it.EndpointID, it.OrderingKey, it.DeliveryID, park, at)
}

// lookup finds a delivery's item: among those put recently, or through the
// reverse index.
func (d *Due) lookup(b *projections.Batch, deliveryID string) (Item, bool, error) {
	if it, ok := d.recent.Get(deliveryID); ok {
		return it, true, nil
	}
	k, ok, err := b.Get(reverseKey(deliveryID))
	if err != nil || !ok {
		return Item{}, false, err
	}
	v, ok, err := b.Get(k)
	if err != nil {
		return Item{}, false, err
	}
	if !ok {
		return Item{}, false, fmt.Errorf("delivery %s: reverse entry without item", deliveryID)
	}
	it, err := decodeItem(v)
	if err != nil {
		return Item{}, false, fmt.Errorf("delivery %s: %w", deliveryID, err)
	}
	return it, true, nil
}

// Keys, under the due index's prefix (P = the endpoint's partition, 2 bytes
// big-endian; S = projections.AppendString; T = projections.AppendTime):
//
//	q P S(endpoint) class T(due) S(delivery)   Item (encodeItem)
//	r S(delivery)                              the delivery's q key
func partitionPrefix(p events.Partition) []byte {
	return binary.BigEndian.AppendUint16([]byte{'q'}, uint16(p))
}

func endpointPrefix(endpointID string) []byte {
	return projections.AppendString(partitionPrefix(events.PartitionOf(endpointID)), endpointID)
}

func classPrefix(endpointID string, c Class) []byte {
	return append(endpointPrefix(endpointID), byte(c))
}

func itemKey(endpointID string, c Class, due time.Time, deliveryID string) []byte {
	return projections.AppendString(projections.AppendTime(classPrefix(endpointID, c), due), deliveryID)
}

// parseItemKey returns the endpoint, class and due time of an item key.
func parseItemKey(k []byte) (endpointID string, c Class, due time.Time, err error) {
	if len(k) < 3 || k[0] != 'q' {
		return "", 0, time.Time{}, fmt.Errorf("%w: not an item key", projections.ErrBadKey)
	}
	endpointID, rest, err := projections.ReadString(k[3:])
	if err != nil {
		return "", 0, time.Time{}, err
	}
	if len(rest) == 0 {
		return "", 0, time.Time{}, fmt.Errorf("%w: item key without class", projections.ErrBadKey)
	}
	c = Class(rest[0])
	due, _, err = projections.ReadTime(rest[1:])
	return endpointID, c, due, err
}

func reverseKey(deliveryID string) []byte { return projections.AppendString([]byte{'r'}, deliveryID) }

// asTime converts a timestamp, nil to the zero time.
func asTime(ts *timestamppb.Timestamp) time.Time {
	if ts == nil {
		return time.Time{}
	}
	return ts.AsTime()
}
