package due

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/confcheck"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Name is the due index's projection name; renaming it rebuilds it. It
// became "due.v2" when keys began with the partition, and "due.v3" when a
// key's deliveries waited in the order of their plans' positions and its
// sequences were counted by token from their attempts (ADR 0064): a store
// of before is rebuilt from the log rather than read in the old layout.
const Name = "due.v3"

// Defaults of the zero Config.
const (
	DefaultSweepInterval = 5 * time.Second
	DefaultStaleAfter    = 10 * time.Second
	DefaultLimit         = 100
	// DefaultCheckpointAfter is how long an ordered key's last sequence
	// waits unchecked before its endpoint's grain checkpoints it: far
	// below any retention, and long enough that a busy key is written
	// at most once per period.
	DefaultCheckpointAfter = 10 * time.Minute
)

// Class orders due work: new deliveries come before any retry, both in an
// endpoint's pulls and for the node's attempt slots (package dispatch).
type Class uint8

const (
	// ClassNew is a delivery that has had no attempt yet.
	ClassNew Class = 0
	// ClassRetry is a delivery waiting for another attempt: an automatic retry or
	// a manual replay.
	ClassRetry Class = 1
)

func (c Class) String() string {
	if c == ClassNew {
		return "new"
	}
	return "retry"
}

// Item is one delivery that needs an attempt.
type Item struct {
	DeliveryID string
	TenantID   string
	EventID    string
	// EventType and ConfigVersion are empty for a manual replay of a
	// delivery that had already ended: ReplayRequested does not carry them,
	// and a replay uses the current configuration anyway.
	EventType     string
	EndpointID    string
	ConfigVersion int64
	Class         Class
	// Manual is set for a replay requested by a user.
	Manual bool
	// DueAt is when the attempt is due: the planned time for new work,
	// next_attempt_at for a retry, the request time for a replay.
	DueAt     time.Time
	PlannedAt time.Time
	// ExpiresAt ends automatic retries; zero when unknown (replays).
	ExpiresAt time.Time
	// Attempts counts the attempts made so far, as of the last failure.
	Attempts int32

	// Ordering, OrderingKey and Plan are set on a delivery that its
	// endpoint orders by key (see order.go): its event's key, and the log
	// position of its plan, which orders the key's deliveries. Sequence is
	// the webhook-sequence it was first sent with (from its attempts), 0
	// until then: the grain numbers a key's head when it first sends it
	// (see order_counter.go).
	Ordering    hooklinev1.KeyOrdering
	OrderingKey string
	Sequence    int64
	Plan        events.Position
	// Token and TokenKey are the key's token, set by [Due.Pull] on a head
	// it numbered (Sequence): not stored with the item.
	Token    []byte
	TokenKey string
	// Waiting says the delivery waits behind its key's head: it is not due
	// and no pull returns it.
	Waiting bool
}

// Ordered reports whether the delivery is attempted in its key's order.
func (it *Item) Ordered() bool {
	return it.Ordering != hooklinev1.KeyOrdering_KEY_ORDERING_NONE && it.OrderingKey != ""
}

// Waker is told that an endpoint has work due, so that its grain pulls.
// Wakes are hints: they may repeat and the grain finds out what is due by
// calling [Due.Pull]. Wake is called from the runner's goroutine and must
// not block.
type Waker interface {
	Wake(endpointID string)
}

// Config configures a [Due]. The zero value is valid: no waker, the default
// sweep.
type Config struct {
	// Waker is told when an endpoint has work due; nil wakes nobody.
	Waker Waker
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SweepInterval is how often Run looks for stale endpoints; 0 means
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// StaleAfter is how long due work may wait before the sweeper wakes its
	// endpoint again; 0 means DefaultStaleAfter.
	StaleAfter time.Duration
	// Tokens makes ordering keys' tokens, with which Pull numbers the
	// heads it returns (*seal.Payloads); nil leaves them to the grain.
	Tokens Tokens
	// CheckpointAfter is how long an ordered key's last sequence may wait
	// unchecked before the sweeper wakes its endpoint to checkpoint it
	// (see order_checkpoint.go); 0 means DefaultCheckpointAfter. It must be well
	// below the log's retention.
	CheckpointAfter time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	return confcheck.All("due config",
		confcheck.NotNegative("sweep interval", c.SweepInterval),
		confcheck.NotNegative("stale after", c.StaleAfter),
		confcheck.NotNegative("checkpoint after", c.CheckpointAfter),
	)
}

func (c Config) withDefaults() Config {
	if c.Waker == nil {
		c.Waker = nopWaker{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.CheckpointAfter == 0 {
		c.CheckpointAfter = DefaultCheckpointAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

type nopWaker struct{}

func (nopWaker) Wake(string) {}

// Due is the projection of the deliveries that still need an attempt, per
// endpoint, new work ahead of retries, each class in due-time order. Endpoint
// grains pull from it with [Due.Pull]; it wakes them through its [Waker].
//
// It is a partitioned projection: it holds the deliveries of the node's
// partitions. It keeps in memory, per endpoint with work in a live
// partition, its oldest new delivery and its earliest retry (loaded from
// the store when the partition goes live, refreshed after every batch),
// which drive the wakes, the sweeper and [Due.Stats]. Queries and Stats are
// safe for concurrent use with the runner and Run.
type Due struct {
	store           *projections.Store
	waker           Waker
	now             func() time.Time
	sweep           time.Duration
	stale           time.Duration
	checkpointAfter time.Duration
	tokens          Tokens
	logger          *slog.Logger

	// touched lists the endpoints the current batch changed, with the
	// earliest due time it added per class, and counted those whose
	// unchecked ordering counts it changed; only the runner's goroutine
	// uses them (Apply and the commit hook), and buf (put's encoding).
	touched map[string]head
	counted map[string]struct{}
	buf     []byte
	recent  *projections.Recent[Item] // items put lately, for Apply
	seen    seenFilter                // the index's deliveries, for Apply (item_seen.go)
	marks   marks                     // erasures, deletions, what counts exist (order_counter.go)
	numbers numbers                   // heads' numbers, for Pull (order_counter.go)

	// mu guards live, heads, unchecked, timers and scheduled.
	mu        sync.Mutex
	live      events.PartitionSet  // the partitions served here
	heads     map[string]head      // endpoints of live partitions with due work
	unchecked map[string]time.Time // endpoints of live partitions with unchecked counts: since when
	timers    timerHeap            // future first retries, earliest first
	scheduled map[string]time.Time // earliest timer set per endpoint

	kick chan struct{} // signals Run that the earliest timer changed

	// watch holds the deliveries whose outcome a grain waits for
	// (wake_watch.go); watchMu guards its byID, watching counts them.
	watchMu  sync.Mutex
	watch    watches
	watching atomic.Int64
}

// head summarises an endpoint's work: zero times when none.
type head struct {
	oldestNew  time.Time
	firstRetry time.Time
}

// recentItems bounds the items Apply remembers: tens of seconds of new
// deliveries at a few thousand per second, which is when most outcomes come.
const recentItems = 65536

// ErrNotLive means a pull asked for an endpoint whose partition this node
// does not serve (any more, or yet): its grain belongs elsewhere.
var ErrNotLive = errors.New("due: the endpoint's partition is not live on this node")

// New registers a Due with r. Its summaries are loaded per partition as the
// runner makes partitions live.
func New(r *projections.Runner, cfg Config) (*Due, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Due{
		waker: cfg.Waker, now: cfg.Now, sweep: cfg.SweepInterval, stale: cfg.StaleAfter, checkpointAfter: cfg.CheckpointAfter, tokens: cfg.Tokens,
		logger:  cfg.Logger,
		touched: make(map[string]head), counted: make(map[string]struct{}), recent: projections.NewRecent[Item](recentItems),
		heads: make(map[string]head), unchecked: make(map[string]time.Time), scheduled: make(map[string]time.Time), kick: make(chan struct{}, 1),
	}
	if _, err := projections.Registered(r, d, func(s *projections.Store) { d.store = s }); err != nil {
		return nil, err
	}
	if err := d.loadMarks(); err != nil {
		return nil, fmt.Errorf("due index: read its marks: %w", err)
	}
	return d, nil
}

// PartitionsChanged implements [projections.Partitioned]: it forgets the
// endpoints of the partitions no longer live, and loads the summaries of
// those that became live and wakes their endpoints with work. The store is
// read without d.mu, which every pull takes: pulls of the endpoints
// already served do not wait for a promotion's load. The runner calls it
// with no batch being applied, so nothing writes the summaries meanwhile.
func (d *Due) PartitionsChanged(live events.PartitionSet) {
	d.mu.Lock()
	gained, lost := live.Minus(d.live), d.live.Minus(live)
	d.live = live
	if !lost.IsEmpty() {
		for ep := range d.heads {
			if lost.Has(events.PartitionOf(ep)) {
				delete(d.heads, ep)
				delete(d.scheduled, ep)
			}
		}
		for ep := range d.unchecked {
			if lost.Has(events.PartitionOf(ep)) {
				delete(d.unchecked, ep)
			}
		}
	}
	d.mu.Unlock()
	var loaded []loadedHead
	unchecked := map[string]time.Time{}
	var err error
	gained.Each(func(p events.Partition) {
		if err == nil && p != events.NoPartition {
			if loaded, err = d.load(p, loaded); err == nil {
				err = d.loadUnchecked(p, unchecked)
			}
		}
	})
	var wake []string
	now := d.now()
	d.mu.Lock()
	for ep, since := range unchecked {
		d.unchecked[ep] = since
	}
	for _, l := range loaded {
		d.heads[l.ep] = l.h
		if l.h.firstRetry.After(now) {
			d.schedule(l.ep, l.h.firstRetry)
		}
		if l.h.wakeAt(now) {
			wake = append(wake, l.ep)
		}
	}
	d.mu.Unlock()
	d.kickRun()
	if err != nil {
		// The sweeper cannot see these endpoints until a batch touches
		// them; the grains still pull when woken by a publish.
		d.logger.Error("due index: cannot load a partition's summaries", "partitions", gained.String(), "error", err)
	}
	for _, ep := range wake {
		d.waker.Wake(ep)
	}
}

// loadedHead is an endpoint's summary as load read it.
type loadedHead struct {
	ep string
	h  head
}

// load reads the summaries of partition p's endpoints with work by
// skipping through its index: two seeks per endpoint, whatever the number
// of items. It appends them to loaded.
func (d *Due) load(p events.Partition, loaded []loadedHead) ([]loadedHead, error) {
	pp := partitionPrefix(p)
	it, err := d.store.NewIter(pp, projections.PrefixEnd(pp))
	if err != nil {
		return loaded, err
	}
	defer it.Close()
	for ok := it.First(); ok; {
		ep, c, due, err := parseItemKey(it.Key())
		if err != nil {
			return loaded, err
		}
		if n := len(loaded); n == 0 || loaded[n-1].ep != ep {
			loaded = append(loaded, loadedHead{ep: ep})
		}
		h := &loaded[len(loaded)-1].h
		if c == ClassNew {
			h.oldestNew = due
			ok = it.SeekGE(classPrefix(ep, ClassRetry))
		} else {
			h.firstRetry = due
			ok = it.SeekGE(projections.PrefixEnd(endpointPrefix(ep)))
		}
	}
	return loaded, nil
}

// wakeAt reports whether an endpoint with this summary has work at now:
// new deliveries, or a retry due.
func (h head) wakeAt(now time.Time) bool {
	return !h.oldestNew.IsZero() || (!h.firstRetry.IsZero() && !h.firstRetry.After(now))
}

// Pull returns up to limit (0: DefaultLimit) items of an endpoint that need
// an attempt now: every new delivery first (new work is due when planned,
// whatever the clocks say), then the retries due by now, each class in due
// order. An ordering key's head never sent comes numbered (see number). Items stay in the index until their outcome is applied, so a grain
// skips those it has in flight (asking for limit plus that many). An
// endpoint whose partition is not live here fails with [ErrNotLive].
func (d *Due) Pull(endpointID string, now time.Time, limit int) ([]Item, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	// Start at the known heads, past the tombstones of removed items.
	d.mu.Lock()
	h, live := d.heads[endpointID], d.live.Has(events.PartitionOf(endpointID))
	d.mu.Unlock()
	if !live {
		return nil, fmt.Errorf("pull for %s: %w", endpointID, ErrNotLive)
	}
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
	if err := d.number(items); err != nil {
		return nil, fmt.Errorf("due for %s: %w", endpointID, err)
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
