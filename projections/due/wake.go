package due

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hookline/hookline/projections"
)

// Due is the projection of the deliveries that still need an attempt, per
// endpoint, new work ahead of retries, each class in due-time order. Endpoint
// grains pull from it with [Due.Due]; it wakes them through its [Waker].
//
// It keeps in memory, per endpoint with work, its oldest new delivery and its
// earliest retry (rebuilt from the store by [New], refreshed after every
// batch), which drive the wakes, the sweeper and [Due.Stats]. Queries and
// Stats are safe for concurrent use with the runner and Run.
type Due struct {
	store  *projections.Store
	waker  Waker
	now    func() time.Time
	sweep  time.Duration
	stale  time.Duration
	logger *slog.Logger

	// touched lists the endpoints the current batch changed, with the
	// earliest due time it added per class; only the runner's goroutine
	// uses it (Apply and the commit hook), and buf (put's encoding).
	touched map[string]head
	buf     []byte

	// mu guards heads, timers and scheduled.
	mu        sync.Mutex
	heads     map[string]head      // endpoints with due work
	timers    timerHeap            // future first retries, earliest first
	scheduled map[string]time.Time // earliest timer set per endpoint

	kick chan struct{} // signals Run that the earliest timer changed

}

// head summarises an endpoint's work: zero times when none.
type head struct {
	oldestNew  time.Time
	firstRetry time.Time
}

// New registers a Due with r and loads its in-memory summaries from the store.
func New(r *projections.Runner, cfg Config) (*Due, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Due{
		waker: cfg.Waker, now: cfg.Now, sweep: cfg.SweepInterval, stale: cfg.StaleAfter, logger: cfg.Logger,
		touched: make(map[string]head), heads: make(map[string]head), scheduled: make(map[string]time.Time), kick: make(chan struct{}, 1),
	}
	s, err := r.Register(d)
	if err != nil {
		return nil, err
	}
	d.store = s
	if err := d.load(); err != nil {
		return nil, fmt.Errorf("load due index: %w", err)
	}
	return d, nil
}

// load builds the summaries by skipping through the index: two seeks per
// endpoint with work, whatever the number of items.
func (d *Due) load() error {
	it, err := d.store.NewIter([]byte{'q'}, []byte{'q' + 1})
	if err != nil {
		return err
	}
	defer it.Close()
	now := d.now()
	for ok := it.First(); ok; {
		ep, c, due, err := parseItemKey(it.Key())
		if err != nil {
			return err
		}
		h := d.heads[ep]
		if c == ClassNew {
			h.oldestNew = due
			ok = it.SeekGE(classPrefix(ep, ClassRetry))
		} else {
			h.firstRetry = due
			ok = it.SeekGE(projections.PrefixEnd(endpointPrefix(ep)))
		}
		d.heads[ep] = h
		if h.firstRetry.After(now) {
			d.schedule(ep, h.firstRetry)
		}
	}
	return nil
}

// touch marks an endpoint changed by the current batch, and arranges for
// the summaries to be refreshed once the batch commits.
func (d *Due) touch(b *projections.Batch, endpointID string, added *Item) {
	if len(d.touched) == 0 {
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
		// Removed items leave tombstones at the front of the index until
		// compaction drops them; seeking from the previous head (or an
		// earlier item this batch added) skips them.
		prev := d.heads[ep]
		changes = append(changes, change{ep: ep, from: head{earliest(prev.oldestNew, added.oldestNew), earliest(prev.firstRetry, added.firstRetry)}})
	}
	d.mu.Unlock()
	clear(d.touched)
	for i := range changes {
		c := &changes[i]
		c.h, c.err = d.readHead(c.ep, c.from)
	}

	var wake []string
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
		if !c.h.oldestNew.IsZero() || (!c.h.firstRetry.IsZero() && !c.h.firstRetry.After(now)) {
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

// Due returns up to limit (0: DefaultLimit) items of an endpoint that need
// an attempt now: every new delivery first (new work is due when planned,
// whatever the clocks say), then the retries due by now, each class in due
// order. Items stay in the index until their outcome is applied, so a grain
// skips those it has in flight (asking for limit plus that many).
func (d *Due) Due(endpointID string, now time.Time, limit int) ([]Item, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	// Start at the known heads, past the tombstones of removed items.
	d.mu.Lock()
	h := d.heads[endpointID]
	d.mu.Unlock()
	news := classPrefix(endpointID, ClassNew)
	items, err := d.scan(projections.AppendTime(bytes.Clone(news), h.oldestNew), projections.PrefixEnd(news), nil, limit)
	if err != nil {
		return nil, fmt.Errorf("due for %s: %w", endpointID, err)
	}
	if len(items) < limit {
		retries := classPrefix(endpointID, ClassRetry)
		lower := projections.AppendTime(bytes.Clone(retries), h.firstRetry)
		upper := projections.AppendTime(retries, now.Add(time.Nanosecond))
		items, err = d.scan(lower, upper, items, limit)
		if err != nil {
			return nil, fmt.Errorf("due for %s: %w", endpointID, err)
		}
	}
	return items, nil
}

func (d *Due) scan(lower, upper []byte, items []Item, limit int) ([]Item, error) {
	it, err := d.store.NewIter(lower, upper)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	for ok := it.First(); ok && len(items) < limit; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, err
		}
		item, err := decodeItem(v)
		if err != nil {
			return nil, err
		}
		items = append(items, item)
	}
	return items, nil
}

// Get returns a delivery's item; ok is false when it needs no attempt.
func (d *Due) Get(deliveryID string) (Item, bool, error) {
	k, ok, err := d.store.Get(reverseKey(deliveryID))
	if err != nil || !ok {
		return Item{}, false, err
	}
	v, ok, err := d.store.Get(k)
	if err != nil || !ok {
		return Item{}, false, err
	}
	it, err := decodeItem(v)
	if err != nil {
		return Item{}, false, fmt.Errorf("delivery %s: %w", deliveryID, err)
	}
	return it, true, nil
}

// Stats describes the due work of the node, for metrics.
type Stats struct {
	// Endpoints counts the endpoints with work in the index.
	Endpoints int
	// OldestNew is the age of the oldest new delivery; 0 when none.
	OldestNew time.Duration
	// OldestRetry is how long the most overdue retry has been due; 0 when
	// no retry is due.
	OldestRetry time.Duration
}

// Stats summarises the index as of now.
func (d *Due) Stats(now time.Time) Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Stats{Endpoints: len(d.heads)}
	for _, h := range d.heads {
		if !h.oldestNew.IsZero() {
			s.OldestNew = max(s.OldestNew, now.Sub(h.oldestNew))
		}
		if !h.firstRetry.IsZero() && !h.firstRetry.After(now) {
			s.OldestRetry = max(s.OldestRetry, now.Sub(h.firstRetry))
		}
	}
	return s
}

// Sweep wakes every endpoint whose oldest due work has waited longer than
// the configured StaleAfter as of now, and returns how many it woke. A lost
// wake therefore costs at most StaleAfter plus SweepInterval. Paused
// endpoints with work are woken too; their grains ignore it.
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
