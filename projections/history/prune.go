package history

import (
	"context"
	"fmt"
	"time"

	"github.com/hookline/hookline/projections"
)

// pruneChunk bounds the deliveries one pruning batch touches, so that the
// runner, which waits for it, is held up briefly.
const pruneChunk = 1000

// Prune deletes the deliveries planned before cutoff, with their attempts
// and index entries, and returns how many it deleted (whole days count their
// id entries). Whole days before cutoff's day go with one range deletion
// each, after their id entries; the deliveries of cutoff's own day that are
// older than cutoff go one by one. It works in short batches serialised with
// the runner, so it is safe while events are applied.
func (h *History) Prune(ctx context.Context, cutoff time.Time) (int, error) {
	n := 0
	cutDay := dayOf(cutoff)
	// Whole days: from the day before cutoff's to the oldest.
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		var more bool
		err := h.store.Update(func(b *projections.Batch) error {
			lower := dayPrefix(cutDay - 1)
			it, err := b.NewIter(lower, []byte{'d' + 1})
			if err != nil {
				return err
			}
			defer it.Close()
			if !it.First() {
				return nil
			}
			day, err := dayOfKey(it.Key())
			if err != nil {
				return err
			}
			dp := dayPrefix(day)
			// The day's records name its deliveries; drop their id
			// entries a chunk at a time, then the day itself.
			rp := append(dp, 'r')
			k := 0
			for ok := it.SeekGE(rp); ok && k < pruneChunk; ok = it.Next() {
				key := it.Key()
				if len(key) < len(rp) || string(key[:len(rp)]) != string(rp) {
					break
				}
				_, id, err := parseIndexTail(key[len(rp):])
				if err != nil {
					return err
				}
				h.recent.Forget(id)
				if err := b.Delete(idKey(id)); err != nil {
					return err
				}
				if err := b.Delete(key); err != nil {
					return err
				}
				k++
			}
			n += k
			more = true
			if k < pruneChunk {
				return b.DeleteRange(dp, projections.PrefixEnd(dp))
			}
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("prune deliveries before %s: %w", cutoff, err)
		}
		if !more {
			break
		}
	}
	// Cutoff's own day: the deliveries planned before cutoff.
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		k := 0
		err := h.store.Update(func(b *projections.Batch) error {
			rp := append(dayPrefix(cutDay), 'r')
			lower := projections.PrefixEnd(projections.AppendTimeDesc(append([]byte(nil), rp...), cutoff))
			it, err := b.NewIter(lower, projections.PrefixEnd(rp))
			if err != nil {
				return err
			}
			defer it.Close()
			var doomed []Delivery
			for ok := it.First(); ok && len(doomed) < pruneChunk; ok = it.Next() {
				v, err := it.Value()
				if err != nil {
					return err
				}
				d, err := decodeRecord(v)
				if err != nil {
					return err
				}
				doomed = append(doomed, d)
			}
			for i := range doomed {
				h.recent.Forget(doomed[i].ID)
				if err := deleteDelivery(b, &doomed[i]); err != nil {
					return err
				}
			}
			k = len(doomed)
			return nil
		})
		if err != nil {
			return n, fmt.Errorf("prune deliveries before %s: %w", cutoff, err)
		}
		n += k
		if k < pruneChunk {
			return n, nil
		}
	}
}

// deleteDelivery removes one delivery's keys.
func deleteDelivery(b *projections.Batch, d *Delivery) error {
	for _, k := range indexKeys(d) {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	ap := attemptPrefix(d.PlannedAt, d.ID)
	if err := b.DeleteRange(ap, projections.PrefixEnd(ap)); err != nil {
		return err
	}
	if err := b.Delete(recordKey(d.PlannedAt, d.ID)); err != nil {
		return err
	}
	return b.Delete(idKey(d.ID))
}

// Run prunes deliveries older than the retention every PruneEvery until ctx
// ends; it returns ctx.Err(). A failed pruning is logged and retried at the
// next tick.
func (h *History) Run(ctx context.Context) error {
	t := time.NewTicker(h.cfg.PruneEvery)
	defer t.Stop()
	for {
		cutoff := h.cfg.Now().Add(-h.cfg.Retention)
		n, err := h.Prune(ctx, cutoff)
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			h.cfg.Logger.Error("history prune", "cutoff", cutoff, "error", err)
		case n > 0:
			h.cfg.Logger.Info("history pruned", "cutoff", cutoff, "deliveries", n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
