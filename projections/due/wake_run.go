package due

import (
	"container/heap"
	"context"
	"slices"
	"time"
)

// Run wakes endpoints when their earliest retry falls due, and sweeps every
// SweepInterval, until ctx ends; it returns ctx.Err().
func (d *Due) Run(ctx context.Context) error { return d.wakes.run(ctx) }

// Sweep wakes every endpoint whose oldest due work has waited longer than
// the configured StaleAfter as of now, or whose oldest unchecked ordering
// count has waited CheckpointAfter (its grain checkpoints it), and
// returns how many it woke. A lost wake therefore costs at most
// StaleAfter plus SweepInterval. Paused endpoints with work are woken
// too; their grains ignore it.
func (d *Due) Sweep(now time.Time) int { return d.wakes.sweep(now) }

func (w *wakes) run(ctx context.Context) error {
	sweep := time.NewTicker(w.sweepEvery)
	defer sweep.Stop()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		t.Reset(w.fireTimers())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-sweep.C:
			w.sweep(w.now())
		case <-t.C:
		case <-w.kick:
		}
	}
}

func (w *wakes) sweep(now time.Time) int {
	var wake []string
	w.mu.Lock()
	for ep, h := range w.heads {
		oldest := h.oldestNew
		if oldest.IsZero() || (!h.firstRetry.IsZero() && h.firstRetry.Before(oldest)) {
			oldest = h.firstRetry
		}
		if !oldest.IsZero() && now.Sub(oldest) >= w.stale {
			wake = append(wake, ep)
		}
	}
	stale := len(wake)
	for _, ep := range w.wakeUnchecked(now, nil) {
		if !slices.Contains(wake[:stale], ep) {
			wake = append(wake, ep)
		}
	}
	w.mu.Unlock()
	for _, ep := range wake {
		w.waker.Wake(ep)
	}
	if len(wake) > 0 {
		w.logger.Debug("due sweep woke endpoints", "endpoints", len(wake))
	}
	return len(wake)
}

// fireTimers wakes the endpoints whose earliest retry is due and returns how
// long to wait for the next one.
func (w *wakes) fireTimers() time.Duration {
	now := w.now()
	var wake []string
	w.mu.Lock()
	for len(w.timers) > 0 && !w.timers[0].at.After(now) {
		tm := heap.Pop(&w.timers).(timer)
		if w.scheduled[tm.endpointID].Equal(tm.at) {
			delete(w.scheduled, tm.endpointID)
		}
		// The index may have moved on since the timer was set: the retry
		// was taken, removed, or a later one is now the first.
		h := w.heads[tm.endpointID]
		switch {
		case h.firstRetry.IsZero():
		case !h.firstRetry.After(now):
			wake = append(wake, tm.endpointID)
		default:
			w.schedule(tm.endpointID, h.firstRetry)
		}
	}
	wait := time.Hour
	if len(w.timers) > 0 {
		wait = w.timers[0].at.Sub(now)
	}
	w.mu.Unlock()
	for _, ep := range wake {
		w.waker.Wake(ep)
	}
	return wait
}

// schedule sets a timer for an endpoint's first retry unless an earlier one
// is set; it reports whether the earliest timer changed. w.mu must be held.
func (w *wakes) schedule(endpointID string, at time.Time) bool {
	if s, ok := w.scheduled[endpointID]; ok && !at.Before(s) {
		return false
	}
	w.scheduled[endpointID] = at
	earliest := len(w.timers) == 0 || at.Before(w.timers[0].at)
	heap.Push(&w.timers, timer{at: at, endpointID: endpointID})
	return earliest
}

// kickRun tells run that the earliest timer may have changed.
func (w *wakes) kickRun() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
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
