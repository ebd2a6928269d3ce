package projections

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/pause"
)

// A lane is one subscription of the runner, applying the records of a set
// of partitions: the main lane those of no partition and of the live
// partitions, from the main position on; the catch-up lane those of the
// partitions the node gained and that are not live yet, from their
// smallest checkpoint. Run keeps the lanes in step with the partition sets:
// a lane whose set is stale is cancelled, waited for, and started again.
type lane struct {
	main   bool
	parts  events.PartitionSet
	epoch  uint64 // the runner's epoch when it started
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	err    error // written before done is closed

	lastPersist time.Time // of its checkpoints; used under applyMu only
}

// errStaleLane ends a main lane whose partitions are no longer the live
// ones: it must not move the main position past records of a partition it
// does not read. Run starts it again with the live partitions. It also
// ends any lane started before a Rebuild, which must read the log again
// from the rebuilt projection's checkpoints.
var errStaleLane = errors.New("projections: lane partitions changed")

// laneSet is what Run is running; only Run's goroutine touches it.
type laneSet struct {
	main, catchUp *lane
}

// persistEvery bounds how long a lane's progress over records that concern
// no projection stays unwritten: such progress changes no state, so losing
// it in a crash only means reading those records again.
const persistEvery = time.Second

// runLanes is Run's loop: it starts, restarts and stops the lanes as the
// partition sets change, until ctx ends or a lane fails.
func (r *Runner) runLanes(ctx context.Context) error {
	ended := make(chan *lane, 2)
	ls := &r.lanes
	var lost logLoss
	// The held records of a standby are applied by the main lane's next
	// batch once due; the tick applies them when no batch comes.
	every := r.standbyDelay
	if every <= 0 {
		every = time.Minute // nothing is held back
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	defer func() {
		for _, l := range []*lane{ls.main, ls.catchUp} {
			if l != nil {
				l.cancel()
				<-l.done
			}
		}
		ls.main, ls.catchUp = nil, nil
	}()
	for {
		r.promote()
		r.mu.Lock()
		mainParts, catching, epoch := r.live, r.owned.Minus(r.live), r.epoch
		r.mu.Unlock()

		if ls.main == nil || ls.main.parts != mainParts || ls.main.epoch != epoch {
			stopLane(ls.main)
			r.mu.Lock()
			from := r.mainPos
			r.mu.Unlock()
			ls.main = r.startLane(ctx, true, mainParts, epoch, from, ended)
		}
		if ls.catchUp != nil && (ls.catchUp.parts != catching || ls.catchUp.epoch != epoch) {
			stopLane(ls.catchUp)
			ls.catchUp = nil
		}
		if ls.catchUp == nil && !catching.IsEmpty() {
			r.mu.Lock()
			from, _ := r.minCheckpoint(catching)
			r.mu.Unlock()
			r.logger.Info("projections catching up partitions", slog.String("partitions", catching.String()), slog.String("from", from.String()))
			ls.catchUp = r.startLane(ctx, false, catching, epoch, from, ended)
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-r.changed:
		case <-tick.C:
			r.releaseIfDue()
		case l := <-ended:
			if l != ls.main && l != ls.catchUp {
				continue // stopped on purpose
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			stale := errors.Is(l.err, errStaleLane)
			if !stale && transient(l.err) {
				// The log failed (a PostgreSQL restart): subscribe again
				// from the checkpoints, after a pause; nothing was applied
				// past them.
				wait := lost.next()
				r.logger.Warn("projections lost the log; subscribing again", slog.Bool("main", l.main), slog.Duration("retry_in", wait), slog.Any("error", l.err))
				if err := pause.For(ctx, wait); err != nil {
					return err
				}
			}
			if stale || transient(l.err) {
				if l == ls.main {
					ls.main = nil
				} else {
					ls.catchUp = nil
				}
				continue
			}
			name := "main"
			if !l.main {
				name = "catch-up"
			}
			return fmt.Errorf("projections %s lane (partitions %s): %w", name, l.parts, l.err)
		}
	}
}

// startLane subscribes a lane of parts from from; it reports its end on
// ended. epoch is the runner's epoch when parts was read: a lane whose
// partitions changed since (a partition lost) is stale from the start.
func (r *Runner) startLane(ctx context.Context, main bool, parts events.PartitionSet, epoch uint64, from events.Position, ended chan<- *lane) *lane {
	l := &lane{main: main, parts: parts, epoch: epoch, done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(ctx)
	r.mu.Lock()
	var filter events.Filter
	if main {
		filter = filterOf(r.projs, parts)
	} else {
		var projs []*registered
		for _, p := range r.projs {
			if p.part != nil {
				projs = append(projs, p)
			}
		}
		filter = filterOf(projs, parts)
	}
	r.mu.Unlock()
	go func() {
		defer close(l.done)
		l.err = r.log.Subscribe(l.ctx, from, filter, func(recs []events.Record, through events.Position) error {
			began := time.Now()
			if err := r.commit(l, recs, through); err != nil {
				return applyError{err}
			}
			if !main && r.warmingUp(l.parts) {
				// A warm-up gives way: as long again as the batch took.
				_ = pause.For(l.ctx, min(time.Since(began), maxWarmUpPause))
			}
			return nil
		})
		if l.err == nil {
			l.err = errors.New("subscription ended")
		}
		select {
		case ended <- l:
		case <-l.ctx.Done():
		}
	}()
	return l
}

// maxWarmUpPause bounds one pause of a warm-up (warmingUp).
const maxWarmUpPause = 100 * time.Millisecond

// warmingUp reports whether the catch-up of parts is a warm-up: none of
// them is one this node serves, so no delivery waits for it. A warm-up
// then applies at most half the time, pausing after each batch as long
// as the batch took: a member that comes back or joins under load
// catches up in the background of the others' deliveries, which shared
// two cores with its catch-up at full speed and slowed for a second or
// two. A catch-up of a partition the node serves (a takeover without a
// standby) goes at full speed.
func (r *Runner) warmingUp(parts events.PartitionSet) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	served := parts.Intersect(r.serving)
	served.Remove(events.NoPartition)
	return served.IsEmpty()
}

func stopLane(l *lane) {
	if l != nil {
		l.cancel()
		<-l.done
	}
}

// commit applies one batch of a lane and moves its checkpoints to through,
// in one Pebble batch; then it runs the batch's hooks and, for the
// catch-up lane, promotes the partitions that reached the main lane.
func (r *Runner) commit(l *lane, recs []events.Record, through events.Position) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if err := l.ctx.Err(); err != nil {
		return err // a stale lane: its successor reads these records again
	}
	r.mu.Lock()
	active := r.live
	if l.epoch != r.epoch || (l.main && l.parts != r.live) {
		r.mu.Unlock()
		return errStaleLane
	}
	if !l.main {
		active = l.parts.Intersect(r.owned.Minus(r.live))
	}
	standby := r.standby(l, recs)
	r.mu.Unlock()

	st := newStaging(r.db)
	defer st.close()
	var hooks []func()
	var n uint64
	if l.main && (standby.IsEmpty() || r.heldDue()) {
		// What the main lane held back goes first: its records come
		// before this batch's in the log.
		held, err := r.applyHeld(st, &hooks, r.held.parts)
		if err != nil {
			return err
		}
		n += held
	}
	applied, err := r.applyBatch(st, &hooks, active.Minus(standby), recs)
	if err != nil {
		return err
	}
	n += applied
	if err := st.flush(); err != nil {
		return err
	}
	if !standby.IsEmpty() {
		r.hold(recs, standby, through)
	}

	// Move the checkpoints (not those of the partitions held back); write
	// them with the state they cover, or alone now and then when the batch
	// changed nothing.
	now := time.Now()
	r.mu.Lock()
	for _, p := range r.projs {
		set := active.Minus(standby)
		if p.part == nil {
			set = active.Intersect(events.NewPartitionSet(events.NoPartition))
		}
		if p.ckpt.advance(set, through) {
			p.ckptPersist = true
		}
	}
	r.mu.Unlock()
	if pb := st.pb; !pb.Empty() || now.Sub(l.persisted()) >= persistEvery {
		if err := r.writeCheckpoints(pb); err != nil {
			return err
		}
		// No fsync, no write-ahead log: the checkpoint commits atomically
		// with the state it covers, and a crash that loses the memtables
		// not flushed yet loses both, so the lost events are applied
		// again, once.
		if err := pb.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("commit projections at %s: %w", through, err)
		}
		l.markPersisted(now)
	}
	// Hooks first: once WaitFor returns, the projections' in-memory state
	// reflects the batch too.
	for _, h := range hooks {
		h()
	}

	r.mu.Lock()
	if l.main && r.mainPos.Less(through) {
		r.mainPos = through
	}
	if len(recs) > 0 {
		r.recorded = recs[len(recs)-1].Recorded
	}
	r.records += n
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
	if !l.main {
		r.promoteLocked()
	}
	return nil
}

// writeCheckpoints writes through pb the checkpoints that moved since they
// were last written. applyMu is held.
func (r *Runner) writeCheckpoints(pb *pebble.Batch) error {
	for _, p := range r.projs {
		if !p.ckptPersist {
			continue
		}
		if err := pb.Set(checkpointKey(p.name), p.ckpt.encode(), nil); err != nil {
			return fmt.Errorf("projection %s: set checkpoint: %w", p.name, err)
		}
		p.ckptPersist = false
	}
	return nil
}

// applyBatch applies the records of the active partitions to the
// projections that want them and have not applied them yet, staging their
// writes in st (the caller flushes it); it returns how many records some
// projection applied.
func (r *Runner) applyBatch(st *staging, hooks *[]func(), active events.PartitionSet, recs []events.Record) (uint64, error) {
	batches := make([]Batch, len(r.projs))
	for i, p := range r.projs {
		batches[i] = newStagedBatch(st, p.prefix, hooks)
	}
	var n uint64
	for i := range recs {
		rec := &recs[i]
		part := rec.Partition
		if !active.Has(part) {
			continue
		}
		var msg proto.Message
		for j, p := range r.projs {
			if (part != events.NoPartition && p.part == nil) || !p.ckpt[part].Less(rec.Position) || !p.filter.Match(rec) {
				continue
			}
			if msg == nil {
				m, err := events.Decode(rec)
				if err != nil {
					return 0, fmt.Errorf("projection %s: %w", p.name, err)
				}
				msg = m
				n++
			}
			if err := p.p.Apply(&batches[j], rec, msg); err != nil {
				return 0, fmt.Errorf("projection %s: apply %s@%d (%s) at %s: %w", p.name, rec.Stream, rec.Revision, rec.Type, rec.Position, err)
			}
		}
	}
	return n, nil
}

// promote makes live the gained partitions that have reached the main
// lane: every partitioned projection's checkpoint in them is at or past
// the main position, so the main lane can take them from there.
func (r *Runner) promote() {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.promoteLocked()
}

// promoteLocked is promote with applyMu held.
func (r *Runner) promoteLocked() {
	r.mu.Lock()
	catching := r.owned.Minus(r.live)
	var ready events.PartitionSet
	catching.Each(func(part events.Partition) {
		for _, p := range r.projs {
			if p.part != nil && p.ckpt[part].Less(r.mainPos) {
				return
			}
		}
		ready.Add(part)
	})
	if ready.IsEmpty() {
		r.mu.Unlock()
		return
	}
	live := r.live.Union(ready)
	r.mu.Unlock()
	// The projections are told first: a wait for these partitions returns
	// once their state is loaded (the due index's summaries), not before.
	// applyMu keeps every commit out meanwhile.
	r.partitionsChanged(live)
	r.mu.Lock()
	r.live = live
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
	r.logger.Info("projection partitions live", slog.String("partitions", ready.String()), slog.Int("live", live.Len()-1))
	r.signalChange()
}

// persisted and markPersisted track when a lane last wrote its
// checkpoints; only the lane's own commits (under applyMu) use them.
func (l *lane) persisted() time.Time      { return l.lastPersist }
func (l *lane) markPersisted(t time.Time) { l.lastPersist = t }

// applyError is an error of the runner's own (a projection's Apply, the
// store), as opposed to one of the log: it stops Run.
type applyError struct{ err error }

func (e applyError) Error() string { return e.err.Error() }
func (e applyError) Unwrap() error { return e.err }

// transient reports whether a lane's error is the log's, not the runner's
// nor a closed log's: the lane subscribes again rather than stop Run.
func transient(err error) bool {
	var ae applyError
	return err != nil && !errors.As(err, &ae) && !errors.Is(err, events.ErrClosed) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// logLoss paces the resubscriptions after the log failed: 100 ms doubling
// to 5 s, from 100 ms again once a minute has passed without failure.
type logLoss struct {
	last time.Time
	wait time.Duration
}

func (l *logLoss) next() time.Duration {
	now := time.Now()
	if l.wait == 0 || now.Sub(l.last) > time.Minute {
		l.wait = 100 * time.Millisecond
	} else {
		l.wait = min(2*l.wait, 5*time.Second)
	}
	l.last = now
	return l.wait
}
