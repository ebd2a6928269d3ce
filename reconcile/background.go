package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// DefaultEvery is how often the background checks run.
const DefaultEvery = 30 * time.Second

// Background runs the cheap checks continuously and keeps their counts for
// the node's metrics: a count that is not zero is an alert. The checks:
//
//   - due work that no grain pulls (due_not_pulled) and due work of deleted
//     endpoints (due_deleted_endpoint), from the due index's summaries in
//     memory; due work of paused or disabled endpoints is counted as held;
//   - the plans of the publishes since the last run: every EventPublished
//     has its DeliveriesPlanned chunks, all of them (plan_missing,
//     plan_incomplete), read from the log once, by one member of a
//     cluster (PlansHere).
//
// It repairs nothing: hookline reconcile --repair does. It is safe for
// concurrent use.
type Background struct {
	r     *Reconciler
	every time.Duration

	mu     sync.Mutex // guards counts, held, runs, last
	counts map[string]int64
	held   int64
	runs   int64
	last   time.Time

	// scanMu guards tail, following and open, which Check uses; lock
	// order: scanMu before mu.
	scanMu    sync.Mutex
	tail      events.Position
	following bool                 // tail is where the plans were read up to
	open      map[string]*planTail // event streams whose plan is not complete yet
	here      func() bool          // whether this node follows the plans (nil: it does)
}

// planTail is one event stream's plan as the background has read it.
type planTail struct {
	published bool
	repaired  bool // reconcile planned what it missed
	chunks    int32
	seen      map[int32]bool
	ticks     int // runs that ended with it still incomplete
}

// Background returns the background checks of r, run every every (0:
// DefaultEvery). Run them with Run.
func (r *Reconciler) Background(every time.Duration) *Background {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Background{r: r, every: every, counts: map[string]int64{}, open: map[string]*planTail{}}
}

// BackgroundKinds are the kinds the background checks count.
var BackgroundKinds = []string{KindNotPulled, KindDeletedHolding, KindPlanMissing, KindPlanIncomplete}

// Counts returns the last run's count per kind of discrepancy (every kind
// of BackgroundKinds present), the due deliveries held by paused or
// disabled endpoints, how many runs ran and when the last ended.
func (b *Background) Counts() (counts map[string]int64, held int64, runs int64, last time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	counts = make(map[string]int64, len(BackgroundKinds))
	for _, k := range BackgroundKinds {
		counts[k] = b.counts[k]
	}
	return counts, b.held, b.runs, b.last
}

// PlansHere makes the plans check run only while here reports true. The
// plans are the log's, not a partition's: every member of a cluster would
// read the same records of every publish to count the same discrepancies,
// so one of them does (the node names the owner of partition 1). A node
// that becomes the one follows the publishes from the log's head then; one
// that stops forgets what it followed and counts no plan. Call it before
// Run.
func (b *Background) PlansHere(here func() bool) { b.here = here }

// Start makes the plans followed from the log's head now on: the checks
// look at the publishes after it. Run calls it.
func (b *Background) Start(ctx context.Context) error {
	head, err := b.r.cfg.Log.Head(ctx)
	if err != nil {
		return fmt.Errorf("background reconcile: %w", err)
	}
	b.scanMu.Lock()
	b.tail, b.following = head, true
	b.scanMu.Unlock()
	return nil
}

// Run starts and runs the checks every b.every until ctx ends; it returns
// ctx.Err().
func (b *Background) Run(ctx context.Context) error {
	if err := b.Start(ctx); err != nil {
		return err
	}
	t := time.NewTicker(b.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := b.Check(ctx); err != nil && ctx.Err() == nil {
			b.r.cfg.Logger.Warn("background reconcile", slog.Any("error", err))
		}
	}
}

// Check runs the checks once.
func (b *Background) Check(ctx context.Context) error {
	b.scanMu.Lock()
	defer b.scanMu.Unlock()
	counts := map[string]int64{}
	held, err := b.grains(ctx, counts)
	if err != nil {
		return err
	}
	if err := b.plans(ctx, counts); err != nil {
		return err
	}
	b.mu.Lock()
	b.counts, b.held, b.last = counts, held, b.r.cfg.Now()
	b.runs++
	b.mu.Unlock()
	for _, k := range BackgroundKinds {
		if n := counts[k]; n > 0 {
			b.r.cfg.Logger.Warn("reconcile: discrepancies found; run hookline reconcile for their ids", slog.String("kind", k), slog.Int64("count", n))
		}
	}
	return nil
}

// grains counts the endpoints whose due work nobody pulls.
func (b *Background) grains(ctx context.Context, counts map[string]int64) (held int64, err error) {
	cfg := b.r.cfg
	if cfg.Due == nil || cfg.Registry == nil {
		return 0, nil
	}
	now := cfg.Now()
	for _, h := range cfg.Due.Heads() {
		oldest := h.OldestNew
		if !h.FirstRetry.IsZero() && !h.FirstRetry.After(now) && (oldest.IsZero() || h.FirstRetry.Before(oldest)) {
			oldest = h.FirstRetry
		}
		if oldest.IsZero() {
			continue
		}
		e, ok, err := cfg.Registry.Endpoint(h.EndpointID)
		if err != nil {
			return 0, err
		}
		switch {
		case !ok:
		case e.Deleted:
			if now.Sub(oldest) >= cfg.NotPulledAfter {
				counts[KindDeletedHolding]++
			}
		case e.Paused || e.Disabled:
			held++
		case cfg.Pulls != nil && now.Sub(oldest) >= cfg.NotPulledAfter:
			last := cfg.Pulls.LastPull(h.EndpointID)
			if last.Before(cfg.Started) {
				last = cfg.Started
			}
			if now.Sub(last) < cfg.NotPulledAfter {
				continue
			}
			state, until, err := circuit(ctx, cfg.Log, h.EndpointID)
			if err != nil {
				return 0, err
			}
			if (state == "open" && now.Sub(until) < cfg.NotPulledAfter) || state == "half_open" {
				continue
			}
			counts[KindNotPulled]++
		}
	}
	return held, nil
}

// circuit reads an endpoint's last breaker transition from its stream.
func circuit(ctx context.Context, log events.Log, endpointID string) (state string, until time.Time, err error) {
	recs, err := log.ReadStream(ctx, events.EndpointStream(endpointID), events.Backwards, events.End, 64)
	if errors.Is(err, events.ErrStreamNotFound) {
		return "", time.Time{}, nil
	}
	if err != nil {
		return "", time.Time{}, err
	}
	for i := range recs {
		switch recs[i].Type {
		case "CircuitOpened", "CircuitHalfOpened", "CircuitClosed":
			msg, err := events.Decode(&recs[i])
			if err != nil {
				return "", time.Time{}, err
			}
			switch m := msg.(type) {
			case *hooklinev1.CircuitOpened:
				return "open", asTime(m.GetUntil()), nil
			case *hooklinev1.CircuitHalfOpened:
				return "half_open", time.Time{}, nil
			default:
				return "closed", time.Time{}, nil
			}
		}
	}
	return "", time.Time{}, nil
}

// plans reads the publishes since the last run and counts those whose
// plan is missing or incomplete once a whole run has passed over them (an
// atomic append is read whole; the margin covers a head read in between).
func (b *Background) plans(ctx context.Context, counts map[string]int64) error {
	if b.here != nil && !b.here() {
		b.following = false
		clear(b.open)
		return nil
	}
	log := b.r.cfg.Log
	head, err := log.Head(ctx)
	if err != nil {
		return err
	}
	if !b.following {
		b.tail, b.following = head, true // from now on, as Start
		return nil
	}
	from := b.tail
	filter := events.Filter{StreamPrefixes: []string{events.EventCategory + "-"}, Types: []string{"EventPublished", "DeliveriesPlanned"}}
	if !from.Less(head) {
		err = errScanned
	} else {
		err = log.Subscribe(ctx, from, filter, func(recs []events.Record, through events.Position) error {
			for i := range recs {
				rec := &recs[i]
				if head.Less(rec.Position) {
					return errScanned
				}
				pt := b.open[rec.Stream]
				if pt == nil {
					pt = &planTail{seen: map[int32]bool{}}
					b.open[rec.Stream] = pt
				}
				if rec.Type == "EventPublished" {
					pt.published = true
					continue
				}
				msg, err := events.Decode(rec)
				if err != nil {
					return err
				}
				m := msg.(*hooklinev1.DeliveriesPlanned)
				if m.GetRepair() != nil {
					pt.repaired = true
					continue
				}
				pt.chunks = max(pt.chunks, m.GetChunks())
				pt.seen[m.GetChunk()] = true
			}
			if !through.Less(head) {
				return errScanned
			}
			return nil
		})
	}
	if err != nil && !errors.Is(err, errScanned) {
		return fmt.Errorf("background reconcile: read the plans: %w", err)
	}
	b.tail = head
	for stream, pt := range b.open {
		if pt.repaired || (pt.published && pt.chunks > 0 && int32(len(pt.seen)) == pt.chunks) {
			delete(b.open, stream)
			continue
		}
		pt.ticks++
		if pt.ticks < 2 {
			continue
		}
		if len(pt.seen) == 0 {
			counts[KindPlanMissing]++
		} else {
			counts[KindPlanIncomplete]++
		}
		if pt.ticks > 10 {
			delete(b.open, stream) // reported long enough: a full reconcile lists it
		}
	}
	return nil
}
