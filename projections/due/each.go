package due

import (
	"encoding/binary"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// Each calls fn with every item of partition p in the store, in key order
// (endpoint, class, due time, delivery), whether p is live here or not; fn
// returning an error stops it with that error. It reads a consistent
// snapshot of nothing: items the runner changes meanwhile may or may not
// be seen. Reconciliation compares the index with the log through it.
//
// The deliveries waiting behind their ordering key's head follow the due
// ones, in endpoint, key and sequence order.
func (d *Due) Each(p events.Partition, fn func(Item) error) error {
	for _, pp := range [][]byte{partitionPrefix(p), binary.BigEndian.AppendUint16([]byte{'w'}, uint16(p))} {
		err := d.store.Scan(pp, projections.PrefixEnd(pp), func(_, v []byte) (bool, error) {
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

// Head summarises one endpoint's due work: its oldest new delivery and its
// earliest retry (zero when none).
type Head struct {
	EndpointID string
	OldestNew  time.Time
	FirstRetry time.Time
}

// Heads returns the summary of every endpoint with due work in a live
// partition, from memory (no store read), in no particular order. It is
// safe for concurrent use with the runner.
func (d *Due) Heads() []Head {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Head, 0, len(d.heads))
	for ep, h := range d.heads {
		out = append(out, Head{EndpointID: ep, OldestNew: h.oldestNew, FirstRetry: h.firstRetry})
	}
	return out
}
