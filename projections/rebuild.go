package projections

import (
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hookline/hookline/events"
)

// Rebuild drops everything projection name holds, in every partition, and
// applies the log to it again from the start, while Run runs or before.
// Reconciliation uses it to repair a projection that differs from a replay
// of the log. It costs one read of the node's share of the log; the other
// projections skip what they have already applied (their checkpoints
// hold), so nothing is applied twice.
//
// A [Partitioned] projection's partitions leave the live set at once (due
// pulls answer not live, searches unavailable: nothing is answered from the
// dropped state), catch up from the start of the log in the catch-up lane
// and go live again once they reach the main lane.
//
// A projection of no partition is applied again by the main lane, from the
// start: the main position goes back to it, so WaitFor waits until the
// projection has caught up, but a reader that does not wait (publish reads
// the registry) sees a partial state meanwhile. Rebuild one only on a node
// that serves no traffic (reconcile does it on a stopped node's store).
func (r *Runner) Rebuild(name string) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.closed {
		return ErrClosed
	}
	r.mu.Lock()
	var p *registered
	for _, q := range r.projs {
		if q.name == name {
			p = q
		}
	}
	if p == nil {
		r.mu.Unlock()
		return fmt.Errorf("rebuild %s: no such projection", name)
	}
	ckpt := p.ckpt
	if p.part == nil {
		ckpt[events.NoPartition] = events.Start
	} else {
		// Its records of no partition stay applied (the due index's
		// marks of erasures and deletions are their only effect on its
		// state, and it copes without them: projections/due/order_counter.go);
		// its partitions start over.
		for q := events.Partition(1); q <= events.Partitions; q++ {
			ckpt[q] = events.Start
		}
	}
	r.mu.Unlock()

	pb := r.db.NewBatch()
	defer pb.Close()
	if err := pb.DeleteRange(p.prefix, PrefixEnd(p.prefix), nil); err != nil {
		return fmt.Errorf("rebuild %s: %w", name, err)
	}
	if err := pb.Set(checkpointKey(name), ckpt.encode(), nil); err != nil {
		return fmt.Errorf("rebuild %s: %w", name, err)
	}
	if err := pb.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("rebuild %s: %w", name, err)
	}

	r.mu.Lock()
	p.ckpt, p.ckptPersist = ckpt, false
	r.epoch++
	before := r.live
	if p.part != nil {
		r.live = events.NewPartitionSet(events.NoPartition)
	} else {
		r.mainPos, _ = r.minCheckpoint(events.NewPartitionSet(events.NoPartition))
	}
	live := r.live
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
	if live != before {
		r.partitionsChanged(live)
	}
	r.logger.Info("projection rebuilding from the start of the log", "projection", name)
	r.signalChange()
	return nil
}
