package due

import (
	"container/heap"
	"context"
	"slices"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// touch marks an endpoint changed by the current batch, and arranges for
// the summaries to be refreshed once the batch commits.
func (d *Due) touch(b *projections.Batch, endpointID string, added *Item) {
	if len(d.touched) == 0 && len(d.counted) == 0 {
		b.OnCommit(d.committed)
	}
	h := d.touched[endpointID]
	if added != nil {
		if added.Class == ClassNew {
			h.oldestNew = earliest(h.oldestNew, added.DueAt)
		} else {
			h.firstRetry = earliest(h.firstRetry, added.DueAt)
		}
	}
	d.touched[endpointID] = h
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// committed refreshes the touched endpoints' summaries from the store and
// wakes those with work due now; later retries go to the timers. The
// store is read without d.mu, which every pull takes: one batch can touch
// hundreds of endpoints (a large fan-out), and pulls of other endpoints
// must not wait for those reads. Only the runner's goroutine writes heads
// after New, so the summaries read here cannot change under it.
func (d *Due) committed() {
	d.refreshUnchecked()
	now := d.now()
	type change struct {
		ep   string
		from head // known to be no later than the endpoint's work
		h    head
		err  error
	}
	changes := make([]change, 0, len(d.touched))
	d.mu.Lock()
	for ep, added := range d.touched {
		if !d.live.Has(events.PartitionOf(ep)) {
			continue // catching up: loaded when it goes live
		}
		// Removed items leave tombstones at the front of the index until
		// compaction drops them; seeking from the previous head (or an
		// earlier item this batch added) skips them.
		prev := d.heads[ep]
		changes = append(changes, change{ep: ep, from: head{earliest(prev.oldestNew, added.oldestNew), earliest(prev.firstRetry, added.firstRetry)}})
	}
	d.mu.Unlock()
	clear(d.touched)
	var wake []string
	for ep := range d.watch.wakeFor {
		wake = append(wake, ep) // a watched outcome: woken whatever it has due
	}
	clear(d.watch.wakeFor)
	watched := len(wake)
	for i := range changes {
		c := &changes[i]
		c.h, c.err = d.readHead(c.ep, c.from)
	}

	kick := false
	d.mu.Lock()
	for _, c := range changes {
		if c.err != nil {
			// The next batch or the sweeper tries again.
			d.logger.Error("due summary", "endpoint_id", c.ep, "error", c.err)
			continue
		}
		if c.h == (head{}) {
			delete(d.heads, c.ep)
			continue
		}
		d.heads[c.ep] = c.h
		if c.h.wakeAt(now) && !slices.Contains(wake[:watched], c.ep) {
			wake = append(wake, c.ep)
		}
		if c.h.firstRetry.After(now) && d.schedule(c.ep, c.h.firstRetry) {
			kick = true
		}
	}
	d.mu.Unlock()
	if kick {
		d.kickRun()
	}
	for _, ep := range wake {
		d.waker.Wake(ep)
	}
}

// readHead reads an endpoint's oldest new delivery and earliest retry, that
// are known to be no earlier than from's.
func (d *Due) readHead(endpointID string, from head) (head, error) {
	prefix := endpointPrefix(endpointID)
	it, err := d.store.NewIter(prefix, projections.PrefixEnd(prefix))
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

func (d *Due) kickRun() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// Sweep wakes every endpoint whose oldest due work has waited longer than
// the configured StaleAfter as of now, or whose oldest unchecked ordering
// count has waited CheckpointAfter (its grain checkpoints it), and
// returns how many it woke. A lost wake therefore costs at most
// StaleAfter plus SweepInterval. Paused endpoints with work are woken
// too; their grains ignore it.
func (d *Due) Sweep(now time.Time) int {
	var wake []string
	d.mu.Lock()
	for ep, h := range d.heads {
		oldest := h.oldestNew
		if oldest.IsZero() || (!h.firstRetry.IsZero() && h.firstRetry.Before(oldest)) {
			oldest = h.firstRetry
		}
		if !oldest.IsZero() && now.Sub(oldest) >= d.stale {
			wake = append(wake, ep)
		}
	}
	stale := len(wake)
	for _, ep := range d.wakeUnchecked(now, nil) {
		if !slices.Contains(wake[:stale], ep) {
			wake = append(wake, ep)
		}
	}
	d.mu.Unlock()
	for _, ep := range wake {
		d.waker.Wake(ep)
	}
	if len(wake) > 0 {
		d.logger.Debug("due sweep woke endpoints", "endpoints", len(wake))
	}
	return len(wake)
}

// Run wakes endpoints when their earliest retry falls due, and sweeps every
// SweepInterval, until ctx ends; it returns ctx.Err().
func (d *Due) Run(ctx context.Context) error {
	sweep := time.NewTicker(d.sweep)
	defer sweep.Stop()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Reset(d.fireTimers())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sweep.C:
			d.Sweep(d.now())
		case <-t.C:
		case <-d.kick:
		}
	}
}

// fireTimers wakes the endpoints whose earliest retry is due and returns how
// long to wait for the next one.
func (d *Due) fireTimers() time.Duration {
	now := d.now()
	var wake []string
	d.mu.Lock()
	for len(d.timers) > 0 && !d.timers[0].at.After(now) {
		tm := heap.Pop(&d.timers).(timer)
		if d.scheduled[tm.endpointID].Equal(tm.at) {
			delete(d.scheduled, tm.endpointID)
		}
		// The index may have moved on since the timer was set: the retry
		// was taken, removed, or a later one is now the first.
		h := d.heads[tm.endpointID]
		switch {
		case h.firstRetry.IsZero():
		case !h.firstRetry.After(now):
			wake = append(wake, tm.endpointID)
		default:
			d.schedule(tm.endpointID, h.firstRetry)
		}
	}
	wait := time.Hour
	if len(d.timers) > 0 {
		wait = d.timers[0].at.Sub(now)
	}
	d.mu.Unlock()
	for _, ep := range wake {
		d.waker.Wake(ep)
	}
	return wait
}

// schedule sets a timer for an endpoint's first retry unless an earlier one
// is set; it reports whether the earliest timer changed. d.mu must be held.
func (d *Due) schedule(endpointID string, at time.Time) bool {
	if s, ok := d.scheduled[endpointID]; ok && !at.Before(s) {
		return false
	}
	d.scheduled[endpointID] = at
	earliest := len(d.timers) == 0 || at.Before(d.timers[0].at)
	heap.Push(&d.timers, timer{at: at, endpointID: endpointID})
	return earliest
}

type timer struct {
	at         time.Time
	endpointID string
}

// timerHeap is a min-heap of timers by time.
type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}
