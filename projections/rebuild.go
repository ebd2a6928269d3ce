package projections

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hookline/hookline/events"
)

// ErrRebuildRunning means a projection of no partition was asked to
// rebuild while Run runs: the node reads it to decide what to do (publish
// plans from the registry), and a rebuild would answer from a partial
// state until it caught up. Rebuild it before Run (with the node stopped).
var ErrRebuildRunning = errors.New("projections: a projection of no partition can only be rebuilt before Run")

// Rebuild drops everything projection name holds, in every partition, and
// applies the log to it again from the start. Reconciliation uses it to
// repair a projection that differs from a replay of the log.
//
// A [Partitioned] projection may be rebuilt while Run runs: the node's
// partitions leave the live set at once (due pulls answer not live,
// searches unavailable, nothing is answered from the dropped state), catch
// up from the start of the log in the catch-up lane and go live again once
// they reach the main lane; the other projections skip what they have
// already applied (their checkpoints hold), so nothing is applied twice.
// It costs one read of the node's share of the log.
//
// A projection of no partition can be rebuilt only before Run; while Run
// runs it fails with [ErrRebuildRunning].
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
	switch {
	case p == nil:
		r.mu.Unlock()
		return fmt.Errorf("rebuild %s: no such projection", name)
	case p.part == nil && r.started && !r.stopped:
		r.mu.Unlock()
		return fmt.Errorf("rebuild %s: %w", name, ErrRebuildRunning)
	}
	ckpt := p.ckpt
	if p.part == nil {
		ckpt[events.NoPartition] = events.Start
	} else {
		// Its records of no partition (none that change its state) stay
		// applied; its partitions start over.
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
