package due

import (
	"errors"
	"fmt"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
)

// Name is the due index's projection name; renaming it rebuilds it. It
// became "due.v2" when keys began with the partition, and "due.v3" when a
// key's deliveries waited in the order of their plans' positions and its
// sequences were counted by token from their attempts (ADR 0064): a store
// of before is rebuilt from the log rather than read in the old layout.
const Name = "due.v3"

// ErrNotLive means a pull asked for an endpoint whose partition this node
// does not serve (any more, or yet): its grain belongs elsewhere.
var ErrNotLive = errors.New("due: the endpoint's partition is not live on this node")

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
	items   *itemStore // the items, in the store (item_store.go)
	apply   *applier   // what each event changes (apply.go)
	order   *ordering  // ordering keys' heads and turns (order.go)
	counts  *counter   // ordering keys' last sequences sent (order_counter.go)
	numbers *numbering // the numbers of the heads a pull returns (order_sequence.go)
	wakes   *wakes     // the live partitions' summaries, and the wakes (wake.go)
	watches *watches   // outcomes a grain waits for (wake_watch.go)
}

// New registers a Due with r. Its summaries are loaded per partition as the
// runner makes partitions live.
func New(r *projections.Runner, cfg Config) (*Due, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Due{}
	store, err := r.Register(d)
	if err != nil {
		return nil, err
	}
	changes := newChanges()
	d.items = newItemStore(store, changes)
	d.counts = &counter{store: store, changes: changes}
	if err := d.counts.loadMarks(); err != nil {
		return nil, fmt.Errorf("due index: read its marks: %w", err)
	}
	d.order = &ordering{store: store, items: d.items}
	d.numbers = &numbering{tokens: cfg.Tokens, counts: d.counts}
	d.watches = &watches{now: cfg.Now}
	d.wakes = newWakes(cfg, d.items, d.counts, changes)
	d.apply = &applier{items: d.items, order: d.order, counts: d.counts, watches: d.watches, changes: changes}
	return d, nil
}

// PartitionsChanged implements [projections.Partitioned]: it forgets the
// endpoints of the partitions no longer live, and loads the summaries of
// those that became live and wakes their endpoints with work. Pulls of the
// endpoints already served do not wait for a promotion's load.
func (d *Due) PartitionsChanged(live events.PartitionSet) { d.wakes.partitionsChanged(live) }

// Pull returns up to limit (0: DefaultLimit) items of an endpoint that need
// an attempt now: every new delivery first (new work is due when planned,
// whatever the clocks say), then the retries due by now, each class in due
// order. An ordering key's head never sent comes numbered (see
// order_sequence.go). Items stay in the index until their outcome is
// applied, so a grain skips those it has in flight (asking for limit plus
// that many). An endpoint whose partition is not live here fails with
// [ErrNotLive].
func (d *Due) Pull(endpointID string, now time.Time, limit int) ([]Item, error) {
	if limit <= 0 {
		limit = DefaultLimit
	}
	// Start at the known heads, past the tombstones of removed items.
	h, live := d.wakes.endpoint(endpointID)
	if !live {
		return nil, fmt.Errorf("pull for %s: %w", endpointID, ErrNotLive)
	}
	items, err := d.items.due(endpointID, h, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due for %s: %w", endpointID, err)
	}
	if err := d.numbers.number(items); err != nil {
		return nil, fmt.Errorf("due for %s: %w", endpointID, err)
	}
	return items, nil
}

// Get returns a delivery's item; ok is false when it needs no attempt.
func (d *Due) Get(deliveryID string) (Item, bool, error) { return d.items.get(deliveryID) }

// Each calls fn with every item of partition p in the store, in key order
// (endpoint, class, due time, delivery), whether p is live here or not; fn
// returning an error stops it with that error. It reads a consistent
// snapshot of nothing: items the runner changes meanwhile may or may not
// be seen. Reconciliation compares the index with the log through it.
//
// The deliveries waiting behind their ordering key's head follow the due
// ones, in endpoint, key and sequence order.
func (d *Due) Each(p events.Partition, fn func(Item) error) error { return d.items.each(p, fn) }

// Head summarises one endpoint's due work: its oldest new delivery and its
// earliest retry (zero when none).
type Head struct {
	EndpointID string
	OldestNew  time.Time
	FirstRetry time.Time
}

// Heads returns the summary of every endpoint with due work in a live
// partition, from memory (no store read), in no particular order. It is
// safe for concurrent use with the runner.
func (d *Due) Heads() []Head { return d.wakes.list() }

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
func (d *Due) Stats(now time.Time) Stats { return d.wakes.stats(now) }
