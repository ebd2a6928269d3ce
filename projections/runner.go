package projections

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
)

var (
	// ErrStopped means the runner's Run has returned: positions will not
	// advance any more. Returned wrapped with Run's error by [Runner.WaitFor].
	ErrStopped = errors.New("projections: runner stopped")
	// ErrClosed means the runner's store was closed.
	ErrClosed = errors.New("projections: store closed")
	// ErrRunning means a projection was registered after Run started, or Run
	// was called twice.
	ErrRunning = errors.New("projections: runner already running")
)

// Projection turns events into queryable state. Implementations are called
// by one [Runner] goroutine only.
type Projection interface {
	// Name names the projection; it scopes the projection's keys and its
	// checkpoint, so renaming it rebuilds it. Non-empty, fixed for life.
	Name() string
	// Filter selects the records passed to Apply. It should list Types:
	// only records that pass some projection's filter are decoded, and a
	// record that does not decode stops the runner.
	Filter() events.Filter
	// Apply applies one event, writing through b only. An error aborts the
	// whole batch (nothing of it is written) and stops the runner.
	Apply(b *Batch, rec *events.Record, msg proto.Message) error
}

// Config configures a [Runner]. The zero value is not valid: Dir is required.
type Config struct {
	// Dir is the Pebble directory of the node's projections. Required.
	Dir string
	// FS is the file system; nil means the disk (vfs.Default). Tests use
	// vfs.NewMem().
	FS vfs.FS
	// Logger receives the runner's and Pebble's logs; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock, for lag; nil means time.Now.
	Now func() time.Time
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("projections config: dir is required")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Runner feeds the projections of a node from the whole log: one catch-up
// subscription, unfiltered, from the smallest checkpoint of its projections.
// For each batch the log delivers, it applies every record to the
// projections whose filter it passes and writes each projection's checkpoint
// (the batch's last position) in the same Pebble batch, so each event is
// applied exactly once even across crashes, and every projection advances on
// every record, matching or not. A deleted store is rebuilt from
// [events.Start].
//
// Register projections, then call Run once. Queries through the projections'
// Stores, WaitFor, Applied and Lag are safe for concurrent use with Run.
type Runner struct {
	log    events.Log
	db     *pebble.DB
	logger *slog.Logger
	now    func() time.Time

	// applyMu serialises commits: the runner's batches and Store.Update. Lock
	// order: applyMu before mu.
	applyMu sync.Mutex
	closed  bool // guarded by applyMu

	// mu guards the fields below.
	mu       sync.Mutex
	projs    []*registered
	started  bool
	stopped  bool
	runErr   error
	applied  events.Position // min checkpoint of all projections
	recorded time.Time       // Recorded of the last applied record
	events   uint64          // records applied to at least one projection since Open
	notify   chan struct{}   // closed and replaced after every batch
}

type registered struct {
	p      Projection
	name   string
	filter events.Filter
	prefix []byte
	ckpt   events.Position // written by the Run goroutine under mu
}

// Open opens (or creates) the projection store in cfg.Dir. The Runner reads
// the log l. Close it when Run has returned.
func Open(l events.Log, cfg Config) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if l == nil {
		return nil, errors.New("projections: nil log")
	}
	cfg = cfg.withDefaults()
	db, err := pebble.Open(cfg.Dir, &pebble.Options{
		FS:                 cfg.FS,
		Logger:             pebbleLogger{cfg.Logger},
		FormatMajorVersion: pebble.FormatNewest,
		// Projections rewrite the same keys often (a delivery moves
		// between indexes within seconds): a large memtable absorbs those
		// writes before they reach a table.
		MemTableSize: 64 << 20,
	})
	if err != nil {
		return nil, fmt.Errorf("open projection store %s: %w", cfg.Dir, err)
	}
	return &Runner{log: l, db: db, logger: cfg.Logger, now: cfg.Now, notify: make(chan struct{})}, nil
}

// Register adds p to the runner and returns its Store. Call it before Run.
// p starts from its checkpoint, or from the start of the log when it has none.
func (r *Runner) Register(p Projection) (*Store, error) {
	name := p.Name()
	if name == "" {
		return nil, errors.New("register projection: empty name")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return nil, fmt.Errorf("register %s: %w", name, ErrRunning)
	}
	for _, q := range r.projs {
		if q.name == name {
			return nil, fmt.Errorf("register %s: duplicate projection name", name)
		}
	}
	ckpt, err := r.checkpoint(name)
	if err != nil {
		return nil, fmt.Errorf("register %s: %w", name, err)
	}
	reg := &registered{p: p, name: name, filter: p.Filter(), prefix: AppendString([]byte{'p'}, name), ckpt: ckpt}
	r.projs = append(r.projs, reg)
	r.applied = r.minCheckpoint()
	return &Store{r: r, prefix: reg.prefix}, nil
}

// Run applies the log to the projections until ctx ends (returning ctx.Err())
// or the log or a projection fails. It may be called once.
func (r *Runner) Run(ctx context.Context) (err error) {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return fmt.Errorf("run: %w", ErrRunning)
	}
	r.started = true
	from := r.minCheckpoint()
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stopped, r.runErr = true, err
		close(r.notify)
		r.notify = make(chan struct{})
		r.mu.Unlock()
	}()

	r.logger.Info("projections starting", "position", from.String())
	err = r.log.Subscribe(ctx, from, events.Filter{}, r.apply)
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return ctx.Err()
	}
	return fmt.Errorf("projections subscription from %s: %w", from, err)
}

// apply applies one batch of the subscription in one Pebble batch.
func (r *Runner) apply(recs []events.Record) error {
	if len(recs) == 0 {
		return nil
	}
	last := recs[len(recs)-1]
	var hooks []func()
	n, err := r.commit(recs, &hooks)
	if err != nil {
		return err
	}
	// Hooks first: once WaitFor returns, the projections' in-memory state
	// reflects the batch too.
	for _, h := range hooks {
		h()
	}

	r.mu.Lock()
	for _, p := range r.projs {
		if p.ckpt.Less(last.Position) {
			p.ckpt = last.Position
		}
	}
	r.applied = r.minCheckpoint()
	if len(r.projs) == 0 {
		r.applied = last.Position
	}
	r.recorded = last.Recorded
	r.events += n
	close(r.notify)
	r.notify = make(chan struct{})
	r.mu.Unlock()
	return nil
}

// commit writes the batch and the checkpoints; it returns the number of
// records that some projection applied.
func (r *Runner) commit(recs []events.Record, hooks *[]func()) (uint64, error) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.closed {
		return 0, ErrClosed
	}
	pb := r.db.NewIndexedBatch()
	defer pb.Close()

	batches := make([]Batch, len(r.projs))
	for i, p := range r.projs {
		batches[i] = Batch{b: pb, prefix: p.prefix, hooks: hooks}
	}
	var n uint64
	for i := range recs {
		rec := &recs[i]
		var msg proto.Message
		for j, p := range r.projs {
			if !p.ckpt.Less(rec.Position) || !p.filter.Match(rec) {
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
	last := recs[len(recs)-1].Position
	for _, p := range r.projs {
		if p.ckpt.Less(last) {
			if err := pb.Set(checkpointKey(p.name), encodePosition(last), nil); err != nil {
				return 0, fmt.Errorf("projection %s: set checkpoint: %w", p.name, err)
			}
		}
	}
	// No fsync: the checkpoint commits atomically with the state it covers,
	// and a crash that loses the tail of the write-ahead log loses both, so
	// the lost events are applied again, once.
	if err := pb.Commit(pebble.NoSync); err != nil {
		return 0, fmt.Errorf("commit projections at %s: %w", last, err)
	}
	return n, nil
}

// WaitFor returns once every projection has applied the log up to pos
// (included), whether or not the event at pos concerned them. It waits for
// the runner's signal after each batch, without polling. It fails when ctx
// ends or when Run has returned (with an error wrapping [ErrStopped]).
func (r *Runner) WaitFor(ctx context.Context, pos events.Position) error {
	for {
		r.mu.Lock()
		applied, ch, stopped, runErr := r.applied, r.notify, r.stopped, r.runErr
		r.mu.Unlock()
		if !applied.Less(pos) {
			return nil
		}
		if stopped {
			return fmt.Errorf("wait for %s (applied %s): %w: %w", pos, applied, ErrStopped, runErr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s (applied %s): %w", pos, applied, ctx.Err())
		}
	}
}

// Applied returns the position up to which every projection has applied the
// log.
func (r *Runner) Applied() events.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// Checkpoints returns each projection's checkpoint, by name.
func (r *Runner) Checkpoints() map[string]events.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]events.Position, len(r.projs))
	for _, p := range r.projs {
		m[p.name] = p.ckpt
	}
	return m
}

// Lag is how far the projections are behind the log, for metrics and health.
type Lag struct {
	// Head is the log's last position; Applied the projections' position.
	Head, Applied events.Position
	// Behind is Head.Commit - Applied.Commit, in the backend's position
	// units (events for the embedded log, bytes for EventStoreDB); 0 when
	// caught up.
	Behind uint64
	// Age is how long ago the last applied record was recorded, when behind;
	// 0 when caught up. It bounds from above how stale the projections are.
	Age time.Duration
	// Events counts the records applied since Open.
	Events uint64
}

// Lag compares the projections' position with the log's head.
func (r *Runner) Lag(ctx context.Context) (Lag, error) {
	head, err := r.log.Head(ctx)
	if err != nil {
		return Lag{}, fmt.Errorf("lag: %w", err)
	}
	r.mu.Lock()
	l := Lag{Head: head, Applied: r.applied, Events: r.events}
	recorded := r.recorded
	r.mu.Unlock()
	if l.Applied.Less(head) {
		if head.Commit > l.Applied.Commit {
			l.Behind = head.Commit - l.Applied.Commit
		}
		if !recorded.IsZero() {
			l.Age = r.now().Sub(recorded)
		}
	}
	return l, nil
}

// Close closes the projection store. Call it after Run has returned; Stores
// must not be used afterwards.
func (r *Runner) Close() error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	if err := r.db.Close(); err != nil {
		return fmt.Errorf("close projection store: %w", err)
	}
	return nil
}

// minCheckpoint returns the smallest checkpoint; r.mu must be held.
func (r *Runner) minCheckpoint() events.Position {
	if len(r.projs) == 0 {
		return events.Start
	}
	min := r.projs[0].ckpt
	for _, p := range r.projs[1:] {
		if p.ckpt.Less(min) {
			min = p.ckpt
		}
	}
	return min
}

func (r *Runner) checkpoint(name string) (events.Position, error) {
	v, ok, err := get(r.db, nil, checkpointKey(name))
	if err != nil || !ok {
		return events.Start, err
	}
	if len(v) != 16 {
		return events.Start, fmt.Errorf("checkpoint of %s: %w: %d bytes", name, ErrBadKey, len(v))
	}
	return events.Position{Commit: binary.BigEndian.Uint64(v), Prepare: binary.BigEndian.Uint64(v[8:])}, nil
}

// checkpointKey is "c" + name; projection data lives under "p" + name.
func checkpointKey(name string) []byte { return AppendString([]byte{'c'}, name) }

func encodePosition(p events.Position) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), p.Commit), p.Prepare)
}

// pebbleLogger sends Pebble's logs to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble", "detail", fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble", "detail", fmt.Sprintf(format, args...))
}

// Fatalf is called by Pebble on a broken invariant, and must not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error("pebble fatal", "detail", msg)
	panic("pebble: " + msg)
}
