package due

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// Wakes. The index keeps in memory, per endpoint of its live partitions,
// its due work summarised (its oldest new delivery and earliest retry) and
// since when its oldest unchecked ordering count has waited
// (order_checkpoint.go). After each batch, the endpoints it changed are
// summarised again from the store and those with work due now are woken;
// a later retry arms a timer, and the sweeper wakes the endpoints whose
// work waited too long (wake_run.go). A partition's summaries are loaded
// from the store when it goes live.

// head summarises an endpoint's work: zero times when none.
type head struct {
	oldestNew  time.Time
	firstRetry time.Time
}

// wakeAt reports whether an endpoint with this summary has work at now:
// new deliveries, or a retry due.
func (h head) wakeAt(now time.Time) bool {
	return !h.oldestNew.IsZero() || (!h.firstRetry.IsZero() && !h.firstRetry.After(now))
}

// earliest returns the earlier of two times, zero meaning none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// changes is what the batch being applied changed, for its commit to
// refresh (wakes.committed): the endpoints whose due work it changed,
// with the earliest due time it added per class; those whose unchecked
// ordering counts it changed; those it applied a watched outcome of. The
// first change of a batch registers the refresh with the batch. Only the
// runner's goroutine uses it.
type changes struct {
	touched map[string]head
	counted map[string]struct{}
	watched map[string]struct{}
	commit  func() // the refresh: wakes.committed
}

func newChanges() *changes {
	return &changes{touched: map[string]head{}, counted: map[string]struct{}{}, watched: map[string]struct{}{}}
}

// hook registers the refresh with b, at the batch's first change.
func (c *changes) hook(b *projections.Batch) {
	if len(c.touched) == 0 && len(c.counted) == 0 {
		b.OnCommit(c.commit)
	}
}

// touch marks an endpoint whose due work the batch changed; added is an
// item it put, nil for a removal.
func (c *changes) touch(b *projections.Batch, endpointID string, added *Item) {
	c.hook(b)
	h := c.touched[endpointID]
	if added != nil {
		if added.Class == ClassNew {
			h.oldestNew = earliest(h.oldestNew, added.DueAt)
		} else {
			h.firstRetry = earliest(h.firstRetry, added.DueAt)
		}
	}
	c.touched[endpointID] = h
}

// count marks an endpoint whose unchecked counts the batch changed.
func (c *changes) count(b *projections.Batch, endpointID string) {
	c.hook(b)
	c.counted[endpointID] = struct{}{}
}

// watch marks an endpoint the batch applied a watched outcome of: it is
// woken once the batch commits, whatever it has due.
func (c *changes) watch(b *projections.Batch, endpointID string) {
	c.watched[endpointID] = struct{}{}
	c.touch(b, endpointID, nil)
}

// wakes holds the summaries of the live partitions' endpoints, and wakes
// the endpoints from them through the Waker: after each batch that changed
// them, when a retry falls due, and in the sweep. Only the runner writes
// the summaries (committed, partitionsChanged), one call at a time; its
// queries are safe for concurrent use with the runner and run.
type wakes struct {
	items           *itemStore
	counts          *counter
	changes         *changes
	waker           Waker
	now             func() time.Time
	sweepEvery      time.Duration
	stale           time.Duration
	checkpointAfter time.Duration
	logger          *slog.Logger

	// mu guards live, heads, unchecked, timers and scheduled.
	mu        sync.Mutex
	live      events.PartitionSet  // the partitions served here
	heads     map[string]head      // endpoints of live partitions with due work
	unchecked map[string]time.Time // endpoints of live partitions with unchecked counts: since when
	timers    timerHeap            // future first retries, earliest first
	scheduled map[string]time.Time // earliest timer set per endpoint

	kick chan struct{} // signals run that the earliest timer changed
}

// newWakes returns the wakes of cfg (with its defaults), and makes them
// the refresh of changes.
func newWakes(cfg Config, items *itemStore, counts *counter, changes *changes) *wakes {
	w := &wakes{
		items: items, counts: counts, changes: changes,
		waker: cfg.Waker, now: cfg.Now, sweepEvery: cfg.SweepInterval, stale: cfg.StaleAfter, checkpointAfter: cfg.CheckpointAfter, logger: cfg.Logger,
		heads: make(map[string]head), unchecked: make(map[string]time.Time), scheduled: make(map[string]time.Time), kick: make(chan struct{}, 1),
	}
	changes.commit = w.committed
	return w
}

// partitionsChanged forgets the endpoints of the partitions no longer
// live, and loads the summaries of those that became live, marks them
// live and wakes their endpoints with work. The store is read without w.mu, which every pull
// takes: pulls of the endpoints already served do not wait for a
// promotion's load. The runner calls it with no batch being applied, so
// nothing writes the summaries meanwhile.
func (w *wakes) partitionsChanged(live events.PartitionSet) {
	w.mu.Lock()
	gained, lost := live.Minus(w.live), w.live.Minus(live)
	// The gained partitions go live once loaded (below): until then their
	// endpoints' unchecked counts are not known here, and Retains must
	// keep their deliveries.
	w.live = w.live.Minus(lost)
	if !lost.IsEmpty() {
		for ep := range w.heads {
			if lost.Has(events.PartitionOf(ep)) {
				delete(w.heads, ep)
				delete(w.scheduled, ep)
			}
		}
		for ep := range w.unchecked {
			if lost.Has(events.PartitionOf(ep)) {
				delete(w.unchecked, ep)
			}
		}
	}
	w.mu.Unlock()
	var loaded []loadedHead
	unchecked := map[string]time.Time{}
	var err error
	gained.Each(func(p events.Partition) {
		if err == nil && p != events.NoPartition {
			if loaded, err = w.items.heads(p, loaded); err == nil {
				err = w.counts.loadUnchecked(p, unchecked)
			}
		}
	})
	var wake []string
	now := w.now()
	w.mu.Lock()
	w.live = live
	for ep, since := range unchecked {
		w.unchecked[ep] = since
	}
	for _, l := range loaded {
		w.heads[l.ep] = l.h
		if l.h.firstRetry.After(now) {
			w.schedule(l.ep, l.h.firstRetry)
		}
		if l.h.wakeAt(now) {
			wake = append(wake, l.ep)
		}
	}
	w.mu.Unlock()
	w.kickRun()
	if err != nil {
		// The sweeper cannot see these endpoints until a batch touches
		// them; the grains still pull when woken by a publish.
		w.logger.Error("due index: cannot load a partition's summaries", "partitions", gained.String(), "error", err)
	}
	for _, ep := range wake {
		w.waker.Wake(ep)
	}
}

// committed refreshes the summaries of the endpoints the batch changed
// from the store and wakes those with work due now; later retries go to
// the timers. The store is read without w.mu, which every pull takes: one
// batch can touch hundreds of endpoints (a large fan-out), and pulls of
// other endpoints must not wait for those reads. Only the runner's
// goroutine writes heads after New, so the summaries read here cannot
// change under it.
func (w *wakes) committed() {
	w.refreshUnchecked()
	now := w.now()
	type change struct {
		ep   string
		from head // known to be no later than the endpoint's work
		h    head
		err  error
	}
	refresh := make([]change, 0, len(w.changes.touched))
	w.mu.Lock()
	for ep, added := range w.changes.touched {
		if !w.live.Has(events.PartitionOf(ep)) {
			continue // catching up: loaded when it goes live
		}
		// Removed items leave tombstones at the front of the index until
		// compaction drops them; seeking from the previous head (or an
		// earlier item this batch added) skips them.
		prev := w.heads[ep]
		refresh = append(refresh, change{ep: ep, from: head{earliest(prev.oldestNew, added.oldestNew), earliest(prev.firstRetry, added.firstRetry)}})
	}
	w.mu.Unlock()
	clear(w.changes.touched)
	var wake []string
	for ep := range w.changes.watched {
		wake = append(wake, ep) // a watched outcome: woken whatever it has due
	}
	clear(w.changes.watched)
	watched := len(wake)
	for i := range refresh {
		c := &refresh[i]
		c.h, c.err = w.items.head(c.ep, c.from)
	}

	kick := false
	w.mu.Lock()
	for _, c := range refresh {
		if c.err != nil {
			// The next batch or the sweeper tries again.
			w.logger.Error("due summary", "endpoint_id", c.ep, "error", c.err)
			continue
		}
		if c.h == (head{}) {
			delete(w.heads, c.ep)
			continue
		}
		w.heads[c.ep] = c.h
		if c.h.wakeAt(now) && !slices.Contains(wake[:watched], c.ep) {
			wake = append(wake, c.ep)
		}
		if c.h.firstRetry.After(now) && w.schedule(c.ep, c.h.firstRetry) {
			kick = true
		}
	}
	w.mu.Unlock()
	if kick {
		w.kickRun()
	}
	for _, ep := range wake {
		w.waker.Wake(ep)
	}
}

// endpoint returns an endpoint's summary, and whether its partition is
// live here.
func (w *wakes) endpoint(endpointID string) (head, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.heads[endpointID], w.live.Has(events.PartitionOf(endpointID))
}

// partitions returns the partitions live here.
func (w *wakes) partitions() events.PartitionSet {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.live
}

// list returns every summary (see [Due.Heads]).
func (w *wakes) list() []Head {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Head, 0, len(w.heads))
	for ep, h := range w.heads {
		out = append(out, Head{EndpointID: ep, OldestNew: h.oldestNew, FirstRetry: h.firstRetry})
	}
	return out
}

// stats summarises the summaries as of now (see [Due.Stats]).
func (w *wakes) stats(now time.Time) Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := Stats{Endpoints: len(w.heads)}
	for _, h := range w.heads {
		if !h.oldestNew.IsZero() {
			s.OldestNew = max(s.OldestNew, now.Sub(h.oldestNew))
		}
		if !h.firstRetry.IsZero() && !h.firstRetry.After(now) {
			s.OldestRetry = max(s.OldestRetry, now.Sub(h.firstRetry))
		}
	}
	return s
}
