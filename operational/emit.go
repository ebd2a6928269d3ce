package operational

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hookline/hookline/internal/pause"
)

// ErrRejected marks a publish that can never succeed (the event is
// invalid, or its id was taken by other bytes): the emitter drops the
// entry instead of trying again. A [Publisher] wraps such errors with it.
var ErrRejected = errors.New("operational: event rejected")

// Publisher publishes an operational event for its tenant through the
// publish path: the tenant's endpoints that name the event's type get a
// delivery, signed and retried like any other. It returns how many
// deliveries were planned (0, and nothing written, when no endpoint wants
// the event). Publishing an event id again with the same bytes must be a
// no-op. *control.Server satisfies it.
type Publisher interface {
	PublishOperational(ctx context.Context, ev Event) (planned int, err error)
}

// Defaults of the zero EmitterConfig.
const (
	DefaultBatch       = 256
	DefaultConcurrency = 8
	DefaultRetry       = time.Second
	DefaultMaxRetry    = 30 * time.Second
	DefaultSweepEvery  = 10 * time.Minute
)

// EmitterConfig configures an [Emitter]. The zero value means the
// defaults.
type EmitterConfig struct {
	// Batch is how many entries one pass takes; 0 means DefaultBatch.
	Batch int
	// Concurrency is how many publishes run at once; 0 means
	// DefaultConcurrency.
	Concurrency int
	// Retry is the first pause after a pass that could not publish
	// everything, doubled up to MaxRetry; 0 means the defaults.
	Retry, MaxRetry time.Duration
	// SweepEvery is how often entries older than the feed's MaxAge are
	// dropped; 0 means DefaultSweepEvery.
	SweepEvery time.Duration
	// Logger gets the emitter's messages; nil means slog.Default().
	Logger *slog.Logger
}

func (c EmitterConfig) withDefaults() EmitterConfig {
	if c.Batch <= 0 {
		c.Batch = DefaultBatch
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Retry <= 0 {
		c.Retry = DefaultRetry
	}
	if c.MaxRetry <= 0 {
		c.MaxRetry = DefaultMaxRetry
	}
	if c.SweepEvery <= 0 {
		c.SweepEvery = DefaultSweepEvery
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Emitter publishes the feed's outbox entries of the node's live
// partitions and removes each once published (or answered as a duplicate,
// or rejected for good). Run it once per node.
type Emitter struct {
	feed *Feed
	pub  Publisher
	cfg  EmitterConfig

	mu                sync.Mutex // guards the counts
	published, failed uint64
}

// NewEmitter returns the emitter of feed's outbox through pub.
func NewEmitter(feed *Feed, pub Publisher, cfg EmitterConfig) *Emitter {
	return &Emitter{feed: feed, pub: pub, cfg: cfg.withDefaults()}
}

// Run emits until ctx ends, returning ctx.Err(). It passes over the outbox
// whenever the feed adds entries or the partitions change, pauses (growing
// up to MaxRetry) while publishing fails, and drops stale entries every
// SweepEvery.
func (e *Emitter) Run(ctx context.Context) error {
	sweep := time.NewTicker(e.cfg.SweepEvery)
	defer sweep.Stop()
	e.sweep()
	var backoff time.Duration
	for {
		more, err := e.pass(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			backoff = min(max(2*backoff, e.cfg.Retry), e.cfg.MaxRetry)
			e.cfg.Logger.Warn("operational events: publishing failed; trying again", "error", err, "retry_in", backoff)
			if err := pause.For(ctx, backoff); err != nil {
				return err
			}
			continue
		}
		backoff = 0
		if more {
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.feed.Added():
		case <-sweep.C:
			e.sweep()
		}
	}
}

// pass publishes one batch of the live partitions' entries. It reports
// whether the batch was full (more may wait) and the first error of a
// publish that may succeed later.
func (e *Emitter) pass(ctx context.Context) (more bool, err error) {
	due, err := e.feed.entries(e.feed.Live(), e.cfg.Batch)
	if err != nil || len(due) == 0 {
		return false, err
	}
	var (
		mu       sync.Mutex // guards done and firstErr
		done     [][]byte
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, e.cfg.Concurrency)
	)
	for _, en := range due {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n, err := e.pub.PublishOperational(ctx, en.ev)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				done = append(done, en.key)
				e.count(true)
				if n > 0 {
					e.cfg.Logger.Debug("operational event published", "tenant_id", en.ev.TenantID, "event_id", en.ev.ID, "event_type", en.ev.Type, "deliveries", n)
				}
			case errors.Is(err, ErrRejected):
				done = append(done, en.key)
				e.count(false)
				e.cfg.Logger.Error("operational event rejected; dropped", "tenant_id", en.ev.TenantID, "event_id", en.ev.ID, "event_type", en.ev.Type, "error", err)
			case firstErr == nil:
				firstErr = err
			}
		})
	}
	wg.Wait()
	if err := e.feed.remove(done); err != nil {
		return false, err
	}
	return len(due) == e.cfg.Batch && firstErr == nil, firstErr
}

func (e *Emitter) count(ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ok {
		e.published++
	} else {
		e.failed++
	}
}

// sweep drops the entries older than the feed's MaxAge.
func (e *Emitter) sweep() {
	keys, err := e.feed.stale()
	if err == nil && len(keys) > 0 {
		err = e.feed.remove(keys)
	}
	if err != nil {
		e.cfg.Logger.Warn("operational events: cannot drop stale outbox entries", "error", err)
		return
	}
	if len(keys) > 0 {
		e.cfg.Logger.Info("operational events: dropped outbox entries past their age", "entries", len(keys))
	}
}

// Stats are the emitter's counts since it started.
type Stats struct {
	// Emitted counts entries published (or answered as duplicates, or
	// wanted by no endpoint); Rejected, entries dropped as invalid.
	Emitted, Rejected uint64
}

// Stats returns the emitter's counts.
func (e *Emitter) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return Stats{Emitted: e.published, Rejected: e.failed}
}
