package due

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Ordering by key. On an endpoint that orders by key, the deliveries of
// one ordering key are attempted one at a time, in the log's order of
// their plans. The index enforces it by holding only each key's head
// among the due items: the key's later deliveries wait under their own
// keys, in the order of their plans' positions, and the next one becomes
// due (as new work, at its planned time) when the head's outcome ends
// it. Every replica of a partition applies the same records in the same
// order, so the heads and the queues are the same on every member, and
// after any rebuild. A delivery's 24 hours count from its turn: one that
// waited behind its key's head gets, when it becomes the head, as long
// as its plan gave it from then.
//
// Keys, beside the items (item_store.go, which keeps the waiting ones
// under w) and the counts (order_counter.go):
//
//	k P S(endpoint) S(key)                      the key's head (keyStateBytes)
//
// A key's k entry lives while the key has a head, its items' w entries
// while their deliveries wait: its name is kept no longer than its
// deliveries.

// KeyState is an ordering key with a head: the delivery it waits on.
type KeyState struct {
	EndpointID  string
	OrderingKey string
	// Head is the delivery the key's later ones wait behind.
	Head string
	// Parked says the head ended failed on an endpoint that parks keys:
	// the key waits for a person (a skip, or a successful replay).
	Parked bool
	// BlockedSince is when the head first failed; zero while it has not.
	BlockedSince time.Time
	// Waiting counts the key's deliveries behind the head (filled by
	// [Due.Keys] only).
	Waiting int
}

// Blocked reports whether the key's head has failed at least once.
func (k *KeyState) Blocked() bool { return k.Parked || !k.BlockedSince.IsZero() }

// KeyStats counts, over the live partitions, the ordering keys whose head
// has failed, and the longest any of them has been blocked as of now.
type KeyStats struct {
	Blocked       int
	OldestBlocked time.Duration
}

// Key returns an endpoint's ordering key with its head, from the
// committed store; ok is false when the key has no head.
func (d *Due) Key(endpointID, key string) (s KeyState, ok bool, err error) {
	return d.order.key(endpointID, key)
}

// Keys returns the ordering keys of an endpoint that have a head, with the
// number of deliveries waiting behind each; blockedOnly keeps those whose
// head has failed (blocked or parked). It reads the committed store.
func (d *Due) Keys(endpointID string, blockedOnly bool, limit int) ([]KeyState, error) {
	return d.order.keys(endpointID, blockedOnly, limit)
}

// BlockedKeys summarises the blocked keys of the live partitions, reading
// the store: its cost grows with the number of keys that have a head.
func (d *Due) BlockedKeys(now time.Time) (KeyStats, error) {
	return d.order.blockedKeys(d.wakes.partitions(), now)
}

// ordering keeps each ordering key's head, and gives the key's next
// delivery its turn when the head ends; the items, due and waiting, are
// the item store's. Its writes are the runner goroutine's; its reads of
// the committed store are safe for concurrent use.
type ordering struct {
	store *projections.Store // the committed store, for the queries
	items *itemStore
}

// plan adds a newly planned delivery, whose plan is at pos in the log: due
// if it is unordered or its key has no head (it becomes the head), else
// waiting behind the head.
func (o *ordering) plan(b *projections.Batch, it Item, pos events.Position) error {
	if !it.Ordered() {
		return o.items.put(b, it)
	}
	it.Plan = pos
	s, busy, err := keyState(b, it.EndpointID, it.OrderingKey)
	if err != nil {
		return err
	}
	// A delivery planned again (its event published again after its
	// stream expired) that was its key's head stays the head.
	if busy && s.Head != it.DeliveryID {
		it.Waiting = true
		return o.items.put(b, it)
	}
	if err := putKeyState(b, &KeyState{EndpointID: it.EndpointID, OrderingKey: it.OrderingKey, Head: it.DeliveryID}); err != nil {
		return err
	}
	return o.items.put(b, it)
}

// itemEnded moves the key of an ordered delivery that ended on; failed
// says it ended without success.
func (o *ordering) itemEnded(b *projections.Batch, it Item, failed bool, at time.Time) error {
	if it.OrderingKey == "" || it.Waiting {
		return nil
	}
	park := failed && it.Ordering == hooklinev1.KeyOrdering_KEY_ORDERING_PARK
	return o.ended(b, it.EndpointID, it.OrderingKey, it.DeliveryID, park, at)
}

// ended moves a key on when its head delivery ended at at: a failed head
// of an endpoint that parks keys parks the key; otherwise the key's next
// delivery becomes its head and due. A delivery that is not the key's
// head changes nothing.
func (o *ordering) ended(b *projections.Batch, endpointID, key, deliveryID string, park bool, at time.Time) error {
	s, ok, err := keyState(b, endpointID, key)
	if err != nil || !ok || s.Head != deliveryID {
		return err
	}
	if park {
		s.Parked = true
		if s.BlockedSince.IsZero() {
			s.BlockedSince = at
		}
		return putKeyState(b, &s)
	}
	return o.promote(b, endpointID, key, at)
}

// blocked records that a key's head failed an attempt and waits for a
// retry.
func (o *ordering) blocked(b *projections.Batch, it *Item, at time.Time) error {
	s, ok, err := keyState(b, it.EndpointID, it.OrderingKey)
	if err != nil || !ok || s.Head != it.DeliveryID || !s.BlockedSince.IsZero() {
		return err
	}
	s.BlockedSince = at
	return putKeyState(b, &s)
}

// skipped ends a key's head at a person's request: a pending head leaves
// the index, and the key's next delivery becomes due.
func (o *ordering) skipped(b *projections.Batch, m *hooklinev1.OrderingKeySkipped) error {
	s, ok, err := keyState(b, m.GetEndpointId(), m.GetOrderingKey())
	if err != nil || !ok || s.Head != m.GetDeliveryId() {
		return err
	}
	if _, err := o.items.remove(b, m.GetDeliveryId()); err != nil {
		return err
	}
	return o.promote(b, m.GetEndpointId(), m.GetOrderingKey(), asTime(m.GetAt()))
}

// promote makes the first waiting delivery of a key its head at at (the
// time of the event that ended the previous head), due now as new work,
// or forgets the key's head when none waits. Its deadline moves as far as
// its turn came after its plan: a delivery does not expire unattempted
// for having waited its turn.
func (o *ordering) promote(b *projections.Batch, endpointID, key string, at time.Time) error {
	next, found, err := o.items.firstWaiting(b, endpointID, key)
	if err != nil {
		return err
	}
	if !found {
		return b.Delete(keyPrefix('k', endpointID, key))
	}
	if err := o.items.delete(b, next); err != nil {
		return err
	}
	next.Waiting, next.Class, next.DueAt = false, ClassNew, next.PlannedAt
	if !next.ExpiresAt.IsZero() && !next.PlannedAt.IsZero() && at.After(next.PlannedAt) {
		if exp := at.Add(next.ExpiresAt.Sub(next.PlannedAt)); exp.After(next.ExpiresAt) {
			next.ExpiresAt = exp
		}
	}
	if err := putKeyState(b, &KeyState{EndpointID: endpointID, OrderingKey: key, Head: next.DeliveryID}); err != nil {
		return err
	}
	return o.items.put(b, next)
}

// key reads a key with its head from the committed store (see [Due.Key]).
func (o *ordering) key(endpointID, key string) (s KeyState, ok bool, err error) {
	s, ok, err = keyState(o.store, endpointID, key)
	if err != nil || !ok {
		return s, ok, err
	}
	s.Waiting, err = o.items.waiting(endpointID, key)
	return s, true, err
}

// keys reads an endpoint's keys with a head from the committed store (see
// [Due.Keys]).
func (o *ordering) keys(endpointID string, blockedOnly bool, limit int) ([]KeyState, error) {
	prefix := keysPrefix('k', endpointID)
	it, err := o.store.NewIter(prefix, projections.PrefixEnd(prefix))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []KeyState
	for ok := it.First(); ok && (limit <= 0 || len(out) < limit); ok = it.Next() {
		key, _, err := projections.ReadString(it.Key()[len(prefix):])
		if err != nil {
			return nil, err
		}
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		s := KeyState{EndpointID: endpointID, OrderingKey: key}
		if err := decodeKeyState(v, &s); err != nil {
			return nil, err
		}
		if blockedOnly && !s.Blocked() {
			continue
		}
		if s.Waiting, err = o.items.waiting(endpointID, key); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// blockedKeys summarises the blocked keys of the partitions live, from the
// committed store (see [Due.BlockedKeys]).
func (o *ordering) blockedKeys(live events.PartitionSet, now time.Time) (KeyStats, error) {
	var st KeyStats
	var err error
	live.Each(func(p events.Partition) {
		if err != nil || p == events.NoPartition {
			return
		}
		prefix := binary.BigEndian.AppendUint16([]byte{'k'}, uint16(p))
		err = o.store.Scan(prefix, projections.PrefixEnd(prefix), func(_, v []byte) (bool, error) {
			var s KeyState
			if err := decodeKeyState(v, &s); err != nil {
				return false, err
			}
			if s.Blocked() {
				st.Blocked++
				if !s.BlockedSince.IsZero() {
					st.OldestBlocked = max(st.OldestBlocked, now.Sub(s.BlockedSince))
				}
			}
			return true, nil
		})
	})
	return st, err
}

// keysPrefix starts the keys of tag for an endpoint's ordering keys.
func keysPrefix(tag byte, endpointID string) []byte {
	b := binary.BigEndian.AppendUint16([]byte{tag}, uint16(events.PartitionOf(endpointID)))
	return projections.AppendString(b, endpointID)
}

func keyPrefix(tag byte, endpointID, key string) []byte {
	return projections.AppendString(keysPrefix(tag, endpointID), key)
}

const keyParked byte = 1

// keyStateBytes encodes s: version, flags, the head (length-prefixed) and
// the blocked time (Unix nanoseconds, 0 for none).
func keyStateBytes(s *KeyState) []byte {
	var flags byte
	if s.Parked {
		flags |= keyParked
	}
	b := []byte{1, flags}
	b = binary.AppendUvarint(b, uint64(len(s.Head)))
	b = append(b, s.Head...)
	var since int64
	if !s.BlockedSince.IsZero() {
		since = s.BlockedSince.UnixNano()
	}
	return binary.AppendVarint(b, since)
}

func decodeKeyState(v []byte, s *KeyState) error {
	if len(v) < 2 || v[0] != 1 {
		return fmt.Errorf("due: unknown key state encoding")
	}
	s.Parked = v[1]&keyParked != 0
	rest := v[2:]
	n, k := binary.Uvarint(rest)
	if k <= 0 || uint64(len(rest)-k) < n {
		return errShortItem
	}
	s.Head, rest = string(rest[k:k+int(n)]), rest[k+int(n):]
	since, k := binary.Varint(rest)
	if k <= 0 {
		return errShortItem
	}
	s.BlockedSince = time.Time{}
	if since != 0 {
		s.BlockedSince = time.Unix(0, since).UTC()
	}
	return nil
}

type reader interface {
	Get(key []byte) ([]byte, bool, error)
}

// keyState reads a key's state; ok is false when the key has no head.
func keyState(r reader, endpointID, key string) (s KeyState, ok bool, err error) {
	v, ok, err := r.Get(keyPrefix('k', endpointID, key))
	if err != nil || !ok {
		return KeyState{}, false, err
	}
	s.EndpointID, s.OrderingKey = endpointID, key
	return s, true, decodeKeyState(v, &s)
}

func putKeyState(b *projections.Batch, s *KeyState) error {
	return b.Set(keyPrefix('k', s.EndpointID, s.OrderingKey), keyStateBytes(s))
}
