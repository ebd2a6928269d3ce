package projections

import (
	"log/slog"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hookline/hookline/events"
)

// A standby's records wait. The partitions a node owns but does not serve
// (it stands by for them: see [Runner.Serve]) are applied so that they can
// be served at once, not record by record as they come: the main lane holds
// their records back and applies them together once the oldest has waited
// Config.StandbyDelay. In one commit most deliveries are planned and ended
// (their first attempt succeeds within the delay), and the commit writes
// only the net effect of its records (staging): nothing to the due index
// for such a delivery, and its history record once. So a standby costs a
// fraction of its owner's apply, which is what a cluster pays for failing
// over without a catch-up.
//
// Until they are applied, the held partitions' checkpoints stay where they
// were: a crash loses the held records with nothing of them written, and
// the next start catches the partitions up from their checkpoints. Every
// reader of a standby's state gets it whole:
//
//   - Serve applies what is held of a partition before it serves it (a
//     promotion or a hand-over), and before the metrics count anything of
//     it; the other partitions' records stay held;
//   - a read of a partition the node stands by for calls Fresh first (the
//     node answers a search or a GET from a standby when the owner cannot);
//   - a batch with a record of no partition that a partitioned projection
//     applies (an endpoint created or deleted, which the operational feed
//     reads when it applies outcomes) applies what is held before it, so
//     every projection applies its records in the log's order;
//   - a lost partition's held records are passed over when the others are
//     applied: its checkpoint stays behind them, for a later return.

// DefaultStandbyDelay is Config.StandbyDelay's default: most first attempts
// end well within it, and a standby that is promoted applies at most that
// much before it serves.
const DefaultStandbyDelay = time.Second

// maxHeld bounds the records held back: a burst applies them early rather
// than hold an unbounded slice (a few MB at most).
const maxHeld = 20_000

// heldRecords is what the main lane holds back; the runner's applyMu
// guards it.
type heldRecords struct {
	recs []events.Record
	// parts are the partitions whose checkpoints wait for recs; through
	// is the main lane's position when it last held their records back.
	parts   events.PartitionSet
	through events.Position
	since   time.Time // when parts stopped being empty
}

// standby returns the partitions whose records a main lane's batch holds
// back: live and not served. None when the runner holds nothing back, for
// the catch-up lane, or when recs has a record of no partition that a
// partitioned projection applies (see the order above). r.mu is held.
func (r *Runner) standby(l *lane, recs []events.Record) events.PartitionSet {
	var s events.PartitionSet
	if !l.main || r.standbyDelay < 0 {
		return s
	}
	s = r.live.Minus(r.serving)
	s.Remove(events.NoPartition)
	if s.IsEmpty() {
		return s
	}
	for i := range recs {
		if recs[i].Partition != events.NoPartition {
			continue
		}
		for _, p := range r.projs {
			if p.part != nil && p.filter.Match(&recs[i]) {
				return events.PartitionSet{}
			}
		}
	}
	return s
}

// hold keeps copies of the records of parts in recs, read by the main lane
// up to through. applyMu is held.
func (r *Runner) hold(recs []events.Record, parts events.PartitionSet, through events.Position) {
	h := &r.held
	if h.parts.IsEmpty() {
		h.since = time.Now() // the wall clock: batching, not the deliveries' time
	}
	h.parts = h.parts.Union(parts)
	h.through = through
	r.mu.Lock()
	r.heldParts = h.parts
	r.mu.Unlock()
	for i := range recs {
		if !parts.Has(recs[i].Partition) {
			continue
		}
		rec := recs[i]
		rec.Data = slices.Clone(rec.Data)
		rec.Metadata = slices.Clone(rec.Metadata)
		h.recs = append(h.recs, rec)
	}
}

// heldDue reports whether the held records should be applied now. applyMu
// is held.
func (r *Runner) heldDue() bool {
	h := &r.held
	return !h.parts.IsEmpty() && (len(h.recs) >= maxHeld || time.Since(h.since) >= r.standbyDelay)
}

// applyHeld applies the held records of the partitions of parts (those
// still live) through pb and moves their checkpoints to where the main
// lane held them back; it forgets those partitions' held records and keeps
// the others'. Pass r.held.parts for all of them. applyMu is held.
func (r *Runner) applyHeld(st *staging, hooks *[]func(), parts events.PartitionSet) (uint64, error) {
	h := &r.held
	release := h.parts.Intersect(parts)
	if release.IsEmpty() {
		return 0, nil
	}
	r.mu.Lock()
	keep := release.Intersect(r.live)
	r.mu.Unlock()
	n, err := r.applyBatch(st, hooks, keep, h.recs)
	if err != nil {
		return 0, err
	}
	r.mu.Lock()
	for _, p := range r.projs {
		if p.part != nil && p.ckpt.advance(keep, h.through) {
			p.ckptPersist = true
		}
	}
	r.mu.Unlock()
	r.forgetHeld(release)
	return n, nil
}

// forgetHeld forgets the held records of parts, keeping the slice's room
// (all of them when parts covers every partition held).
func (r *Runner) forgetHeld(parts events.PartitionSet) {
	h := &r.held
	if h.parts.Minus(parts).IsEmpty() {
		r.dropHeld()
		return
	}
	kept := h.recs[:0]
	for _, rec := range h.recs {
		if !parts.Has(rec.Partition) {
			kept = append(kept, rec)
		}
	}
	clear(h.recs[len(kept):]) // let their data go
	h.recs, h.parts = kept, h.parts.Minus(parts)
	r.mu.Lock()
	r.heldParts = h.parts
	r.mu.Unlock()
}

// dropHeld forgets every held record, keeping the slice's room.
func (r *Runner) dropHeld() {
	h := &r.held
	clear(h.recs) // let their data go
	h.recs, h.parts, h.since = h.recs[:0], events.PartitionSet{}, time.Time{}
	r.mu.Lock()
	r.heldParts = events.PartitionSet{}
	r.mu.Unlock()
}

// releaseHeld applies the held records of the partitions of parts in a
// commit of their own: before a partition is served, for a reader, or when
// the log has gone quiet (then all of them). The other partitions' records
// stay held: a promotion or a read waits for its own partitions' records
// only. If that fails, the released partitions leave the live set and
// catch up from their checkpoints, where an error that persists stops
// Run. applyMu is held.
func (r *Runner) releaseHeld(why string, parts events.PartitionSet) {
	release := r.held.parts.Intersect(parts)
	if release.IsEmpty() || r.closed {
		return
	}
	st := newStaging(r.db)
	defer st.close()
	var hooks []func()
	n, err := r.applyHeld(st, &hooks, release)
	if err == nil {
		err = st.flush()
	}
	if err == nil {
		err = r.writeCheckpoints(st.pb)
	}
	if err == nil {
		err = st.pb.Commit(pebble.NoSync)
	}
	if err != nil {
		r.mu.Lock()
		r.live = r.live.Minus(release)
		live := r.live
		r.epoch++
		r.mu.Unlock()
		r.forgetHeld(release)
		r.logger.Error("projections could not apply a standby's held records; its partitions catch up", slog.String("why", why), slog.String("partitions", release.String()), slog.Any("error", err))
		r.partitionsChanged(live)
		r.signalChange()
		return
	}
	for _, h := range hooks {
		h()
	}
	r.mu.Lock()
	r.records += n
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
}

// Fresh applies what the runner holds back of the partitions in parts (and
// of no other), so
// that a read of them that follows sees every record the main lane has
// read: call it before answering for a partition the node stands by for.
// It costs nothing when none of them is held, and reports whether it
// applied anything. [Runner.WaitForPartitions] calls it.
func (r *Runner) Fresh(parts events.PartitionSet) bool {
	r.mu.Lock()
	held := !r.heldParts.Intersect(parts).IsEmpty()
	r.mu.Unlock()
	if !held {
		return false
	}
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.held.parts.Intersect(parts).IsEmpty() {
		return false
	}
	r.releaseHeld("read", parts)
	return true
}

// releaseIfDue is the main loop's tick: held records are applied once due
// even when the log has gone quiet and no batch comes to apply them.
func (r *Runner) releaseIfDue() {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.heldDue() {
		r.releaseHeld("due", r.held.parts)
	}
}
