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
	// Whole days: from the day before cutoff's to the oldest.
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		var more bool
		err := h.store.Update(func(b *projections.Batch) error {
			k, found, err := h.pruneDayBefore(b, dayOf(cutoff))
			n, more = n+k, found
			return err
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
		err := h.store.Update(func(b *projections.Batch) (err error) {
			k, err = h.pruneBefore(b, cutoff)
			return err
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

// pruneDayBefore prunes a chunk of the newest day before cutDay: the id
// entries of up to pruneChunk of its deliveries (whose records name them),
// then, once they are all gone, the day itself with one range deletion. k
// is how many deliveries it deleted; found is false when no day before
// cutDay is left.
func (h *History) pruneDayBefore(b *projections.Batch, cutDay int64) (k int, found bool, err error) {
	var day int64
	err = b.Scan(dayPrefix(cutDay-1), []byte{'d' + 1}, func(key, _ []byte) (bool, error) {
		var derr error
		day, derr = dayOfKey(key)
		found = true
		return false, derr
	})
	if err != nil || !found {
		return 0, found, err
	}
	dp := dayPrefix(day)
	rp := append(dp, 'r')
	n := 0
	err = b.ScanPrefix(rp, func(key, _ []byte) (bool, error) {
		_, id, err := parseIndexTail(key[len(rp):])
		if err != nil {
			return false, err
		}
		h.recent.Forget(id)
		if err := b.Delete(idKey(id)); err != nil {
			return false, err
		}
		if err := b.Delete(key); err != nil {
			return false, err
		}
		n++
		return n < pruneChunk, nil
	})
	if err != nil {
		return 0, true, err
	}
	if n < pruneChunk {
		return n, true, b.DeleteRange(dp, projections.PrefixEnd(dp))
	}
	return n, true, nil
}

// pruneBefore deletes up to pruneChunk deliveries of cutoff's own day that
// were planned before cutoff, and returns how many it deleted.
func (h *History) pruneBefore(b *projections.Batch, cutoff time.Time) (int, error) {
	rp := append(dayPrefix(dayOf(cutoff)), 'r')
	lower := projections.PrefixEnd(projections.AppendTimeDesc(append([]byte(nil), rp...), cutoff))
	var doomed []Delivery
	err := b.Scan(lower, projections.PrefixEnd(rp), func(_, value []byte) (bool, error) {
		d, err := decodeRecord(value)
		if err != nil {
			return false, err
		}
		doomed = append(doomed, d)
		return len(doomed) < pruneChunk, nil
	})
	if err != nil {
		return 0, err
	}
	for i := range doomed {
		h.recent.Forget(doomed[i].ID)
		if err := deleteDelivery(b, &doomed[i]); err != nil {
			return 0, err
		}
	}
	return len(doomed), nil
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

// Forget deletes the given deliveries (a tenant's own retention, shorter
// than the history's), in batches serialised with the runner.
func (h *History) Forget(ctx context.Context, ds []Delivery) error {
	for len(ds) > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(len(ds), pruneChunk)
		err := h.store.Update(func(b *projections.Batch) error {
			for i := range ds[:n] {
				h.recent.Forget(ds[i].ID)
				if err := deleteDelivery(b, &ds[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("forget deliveries: %w", err)
		}
		ds = ds[n:]
	}
	return nil
}
