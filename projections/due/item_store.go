package due

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// The items. The store of items is the one part of the index that reads
// and writes them: the apply side and the ordering put, move and remove
// them in the runner's batch; pulls, the summaries and reconciliation read
// them from the committed store. Keys, under the projection's prefix (P
// is the endpoint's partition, 2 bytes big-endian; S
// projections.AppendString, T projections.AppendTime, U
// projections.AppendUint64):
//
//	q P S(endpoint) class T(due) S(delivery)    a due Item (encodeItem); class 0 new, 1 retry
//	w P S(endpoint) S(key) U(commit) U(prepare) an Item waiting behind its ordering key's head, by its plan's position
//	r S(delivery)                               the delivery's q or w key
//
// Each item key and reverse entry is set once and then single-deleted, so
// that a delivery that comes and goes within seconds leaves nothing on
// disk, not even a tombstone.

// recentItems bounds the items lookup remembers: tens of seconds of new
// deliveries at a few thousand per second, which is when most outcomes come.
const recentItems = 65536

// itemStore keeps the index's items in the projection's store. Every put
// and delete of a due item notes its endpoint in changes, for the
// summaries' refresh once the batch commits. Its writes and lookup are the
// runner goroutine's; its reads of the committed store are safe for
// concurrent use.
type itemStore struct {
	store   *projections.Store
	changes *changes                  // where put and delete note the endpoints they touch
	buf     []byte                    // put's encoding
	recent  *projections.Recent[Item] // items put lately, for lookup
	seen    seenFilter                // the index's deliveries, for mayHold (item_seen.go)
}

func newItemStore(store *projections.Store, changes *changes) *itemStore {
	return &itemStore{store: store, changes: changes, recent: projections.NewRecent[Item](recentItems)}
}

// put writes it and its reverse entry, and marks its endpoint touched
// unless it waits behind its key's head. The delivery must not be in the
// index (deleted first when it moves): keys are set once.
func (s *itemStore) put(b *projections.Batch, it Item) error {
	s.buf = encodeItem(s.buf[:0], &it) // the batch copies it
	v := s.buf
	k := it.storeKey()
	if err := b.Set(k, v); err != nil {
		return err
	}
	rk := reverseKey(it.DeliveryID)
	if err := b.Set(rk, k); err != nil {
		return err
	}
	s.seen.add(rk)
	s.recent.Put(it.DeliveryID, it)
	if it.Waiting {
		return nil // not due: the endpoint's work is unchanged
	}
	s.changes.touch(b, it.EndpointID, &it)
	return nil
}

// delete removes it's item key and reverse entry.
func (s *itemStore) delete(b *projections.Batch, it Item) error {
	s.recent.Forget(it.DeliveryID)
	if !it.Waiting {
		s.changes.touch(b, it.EndpointID, nil)
	}
	if err := b.SingleDelete(it.storeKey()); err != nil {
		return err
	}
	return b.SingleDelete(reverseKey(it.DeliveryID))
}

// remove drops a delivery, if it is in the index, and returns its item
// (the zero Item when it was not there).
func (s *itemStore) remove(b *projections.Batch, deliveryID string) (Item, error) {
	it, ok, err := s.lookup(b, deliveryID)
	if err != nil || !ok {
		return Item{}, err
	}
	return it, s.delete(b, it)
}

// lookup finds a delivery's item: among those put recently, or through the
// reverse index.
func (s *itemStore) lookup(b *projections.Batch, deliveryID string) (Item, bool, error) {
	if it, ok := s.recent.Get(deliveryID); ok {
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

// prepareSeen builds the filter of the index's deliveries from b when it
// must be built (again) before it answers mayHold.
func (s *itemStore) prepareSeen(b *projections.Batch) error {
	if !s.seen.stale() {
		return nil
	}
	if err := s.seen.build(b); err != nil {
		return fmt.Errorf("due index: build the filter of its deliveries: %w", err)
	}
	return nil
}

// mayHold reports whether the delivery may be in the index: false spares
// a lookup that would miss.
func (s *itemStore) mayHold(deliveryID string) bool {
	return s.seen.mayHave(reverseKey(deliveryID))
}

// firstWaiting returns the delivery that waits first behind a key's head,
// in b; ok is false when none waits.
func (s *itemStore) firstWaiting(b *projections.Batch, endpointID, key string) (next Item, ok bool, err error) {
	prefix := keyPrefix('w', endpointID, key)
	it, err := b.NewIter(prefix, projections.PrefixEnd(prefix))
	if err != nil {
		return Item{}, false, err
	}
	if ok = it.First(); ok {
		var v []byte
		if v, err = it.Value(); err == nil {
			next, err = decodeItem(v)
		}
	}
	_ = it.Close()
	return next, ok, err
}

// get returns a delivery's item from the committed store; ok is false when
// it needs no attempt.
func (s *itemStore) get(deliveryID string) (Item, bool, error) {
	k, ok, err := s.store.Get(reverseKey(deliveryID))
	if err != nil || !ok {
		return Item{}, false, err
	}
	v, ok, err := s.store.Get(k)
	if err != nil || !ok {
		return Item{}, false, err
	}
	it, err := decodeItem(v)
	if err != nil {
		return Item{}, false, fmt.Errorf("delivery %s: %w", deliveryID, err)
	}
	return it, true, nil
}

// due returns up to limit items of an endpoint due at now, from the
// committed store: its new deliveries, then its retries due by now, each
// class in due order, seeking from the endpoint's head, past the
// tombstones of removed items.
func (s *itemStore) due(endpointID string, from head, now time.Time, limit int) ([]Item, error) {
	news := classPrefix(endpointID, ClassNew)
	items, err := s.scan(projections.AppendTime(bytes.Clone(news), from.oldestNew), projections.PrefixEnd(news), nil, limit)
	if err != nil || len(items) >= limit {
		return items, err
	}
	retries := classPrefix(endpointID, ClassRetry)
	lower := projections.AppendTime(bytes.Clone(retries), from.firstRetry)
	upper := projections.AppendTime(retries, now.Add(time.Nanosecond))
	return s.scan(lower, upper, items, limit)
}

func (s *itemStore) scan(lower, upper []byte, items []Item, limit int) ([]Item, error) {
	it, err := s.store.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok && len(items) < limit; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		item, err := decodeItem(v)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, nil
}

// head reads an endpoint's oldest new delivery and earliest retry, that
// are known to be no earlier than from's, from the committed store.
func (s *itemStore) head(endpointID string, from head) (head, error) {
	prefix := endpointPrefix(endpointID)
	it, err := s.store.NewIter(prefix, projections.PrefixEnd(prefix))
	if err != nil {
		return head{}, err
	}
	defer it.Close()
	var h head
	if it.SeekGE(projections.AppendTime(classPrefix(endpointID, ClassNew), from.oldestNew)) {
		_, c, due, err := parseItemKey(it.Key())
		if err != nil {
			return head{}, err
		}
		if c == ClassNew {
			h.oldestNew = due
		}
	}
	if it.SeekGE(projections.AppendTime(classPrefix(endpointID, ClassRetry), from.firstRetry)) {
		_, _, due, err := parseItemKey(it.Key())
		if err != nil {
			return head{}, err
		}
		h.firstRetry = due
	}
	return h, nil
}

// loadedHead is an endpoint's summary as heads read it.
type loadedHead struct {
	ep string
	h  head
}

// heads reads the summaries of partition p's endpoints with work from the
// committed store, skipping through its index: two seeks per endpoint,
// whatever the number of items. It appends them to loaded.
func (s *itemStore) heads(p events.Partition, loaded []loadedHead) ([]loadedHead, error) {
	pp := partitionPrefix(p)
	it, err := s.store.NewIter(pp, projections.PrefixEnd(pp))
	if err != nil {
		return loaded, err
	}
	defer it.Close()
	for ok := it.First(); ok; {
		ep, c, due, err := parseItemKey(it.Key())
		if err != nil {
			return loaded, err
		}
		if n := len(loaded); n == 0 || loaded[n-1].ep != ep {
			loaded = append(loaded, loadedHead{ep: ep})
		}
		h := &loaded[len(loaded)-1].h
		if c == ClassNew {
			h.oldestNew = due
			ok = it.SeekGE(classPrefix(ep, ClassRetry))
		} else {
			h.firstRetry = due
			ok = it.SeekGE(projections.PrefixEnd(endpointPrefix(ep)))
		}
	}
	return loaded, nil
}

// each calls fn with every item of partition p in the committed store:
// the due ones, then those waiting (see [Due.Each]).
func (s *itemStore) each(p events.Partition, fn func(Item) error) error {
	for _, pp := range [][]byte{partitionPrefix(p), binary.BigEndian.AppendUint16([]byte{'w'}, uint16(p))} {
		err := s.store.Scan(pp, projections.PrefixEnd(pp), func(_, v []byte) (bool, error) {
			item, err := decodeItem(v)
			if err != nil {
				return false, err
			}
			return true, fn(item)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// waiting counts a key's deliveries behind its head in the committed
// store.
func (s *itemStore) waiting(endpointID, key string) (int, error) {
	prefix := keyPrefix('w', endpointID, key)
	n := 0
	err := s.store.Scan(prefix, projections.PrefixEnd(prefix), func(_, _ []byte) (bool, error) {
		n++
		return true, nil
	})
	return n, err
}

// storeKey is where it is kept: among the due items, or waiting.
func (it *Item) storeKey() []byte {
	if it.Waiting {
		return waitKey(it.EndpointID, it.OrderingKey, it.Plan)
	}
	return itemKey(it.EndpointID, it.Class, it.DueAt, it.DeliveryID)
}

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

func waitKey(endpointID, key string, plan events.Position) []byte {
	return projections.AppendUint64(projections.AppendUint64(keyPrefix('w', endpointID, key), plan.Commit), plan.Prepare)
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
