package projections

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
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
	// ErrNotLive means a wait for partitions ended while some were not
	// live on this node: not owned here, or still catching up.
	ErrNotLive = errors.New("projections: partition not live on this node")
)

// Projection turns events into queryable state. Implementations are called
// by the [Runner] one batch at a time.
type Projection interface {
	// Name names the projection; it scopes the projection's keys and its
	// checkpoint, so renaming it rebuilds it. Non-empty, fixed for life.
	Name() string
	// Filter selects the records passed to Apply. It should list Types:
	// only records that pass some projection's filter are read from the
	// log and decoded, and a record that does not decode stops the runner.
	Filter() events.Filter
	// Apply applies one event, writing through b only. An error aborts the
	// whole batch (nothing of it is written) and stops the runner.
	Apply(b *Batch, rec *events.Record, msg proto.Message) error
}

// Partitioned is a projection of delivery work: besides the records of no
// partition, it applies those of the partitions the node owns (see
// [Runner.Own]). A projection that is not Partitioned sees only the records
// of no partition.
type Partitioned interface {
	Projection
	// PartitionsChanged tells the projection which partitions are live and
	// served here (see [Runner.Serve]): caught up, their records applied as
	// they come, and acted for by this node. It is called when the set
	// changes, serialised with Apply and the commit hooks, and must not
	// block. Records of a partition are applied before it is live (while it
	// catches up) and stop when it is no longer owned.
	PartitionsChanged(live events.PartitionSet)
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
	// StandbyDelay is how long the records of partitions the node only
	// stands by for (owned, live, not served: see [Runner.Serve]) may wait
	// to be applied together, so that a delivery planned and ended within
	// it is written once (see standby.go); 0 means DefaultStandbyDelay, a
	// negative value applies them as they come, as the served ones.
	StandbyDelay time.Duration
	// CloseFlushTimeout bounds how long Close waits for the store's last
	// flush (a store whose directory was removed can never flush); 0 means
	// DefaultCloseFlushTimeout. What is not flushed is applied again from
	// the log at the next start.
	CloseFlushTimeout time.Duration
}

// DefaultCloseFlushTimeout is Close's default wait for the last flush.
const DefaultCloseFlushTimeout = 10 * time.Second

// Validate reports whether c can be used.
func (c Config) Validate() error {
	if c.Dir == "" {
		return errors.New("projections config: dir is required")
	}
	if c.StandbyDelay > time.Minute {
		return fmt.Errorf("projections config: standby delay %v is over a minute; a standby that far behind takes that long to serve", c.StandbyDelay)
	}
	if c.CloseFlushTimeout < 0 {
		return fmt.Errorf("projections config: close flush timeout %v is negative; use 0 for the default (%v)", c.CloseFlushTimeout, DefaultCloseFlushTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	if c.Now == nil {
		c.Now = time.Now
	}
	c.CloseFlushTimeout = cmp.Or(c.CloseFlushTimeout, DefaultCloseFlushTimeout)
	c.StandbyDelay = cmp.Or(c.StandbyDelay, DefaultStandbyDelay)
	return c
}

// Runner feeds the projections of a node from the log. See the package
// documentation for its lanes, checkpoints and partitions.
//
// Register projections, call Own when the node's partitions are known (and
// whenever they change), and call Run once. Queries through the
// projections' Stores, WaitFor, WaitForPartition, Applied, Live and Lag are
// safe for concurrent use with Run.
type Runner struct {
	log    events.Log
	db     *pebble.DB
	logger *slog.Logger
	now    func() time.Time
	// closeFlushTimeout bounds Close's wait for the last flush.
	closeFlushTimeout time.Duration
	// standbyDelay is Config.StandbyDelay; negative holds nothing back.
	standbyDelay time.Duration
	// held is what the main lane holds back of the standby partitions
	// (standby.go); guarded by applyMu.
	held heldRecords

	// applyMu serialises commits (the lanes' batches and Store.Update) and
	// every change of the partition sets. Lock order: applyMu before mu.
	applyMu sync.Mutex
	closed  bool // guarded by applyMu

	// mu guards the fields below; the lanes' apply reads them under
	// applyMu, and every write holds both.
	mu       sync.Mutex
	projs    []*registered
	started  bool
	stopped  bool
	runErr   error
	owned    events.PartitionSet // the node's partitions, NoPartition always
	live     events.PartitionSet // owned and caught up: the main lane applies them
	serving  events.PartitionSet // the partitions the node acts for (Serve); all until Serve is called
	mainPos  events.Position     // the main lane's position
	recorded time.Time           // Recorded of the last applied record
	records  uint64              // records applied to at least one projection since Open
	notify   chan struct{}       // closed and replaced after every batch
	changed  chan struct{}       // tells Run that the owned or live set changed
	lanes    laneSet             // the lanes running, for Run
	// heldParts is held.parts, for the readers that do not take applyMu.
	heldParts events.PartitionSet
	epoch     uint64 // moved by Rebuild and by a lost partition: the lanes of an older epoch are stale
}

type registered struct {
	p           Projection
	part        Partitioned // nil unless partitioned
	name        string
	filter      events.Filter
	prefix      []byte
	ckpt        checkpoints // written under applyMu and mu
	ckptPersist bool        // the stored checkpoint is behind ckpt
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
	opts := &pebble.Options{
		FS:                 cfg.FS,
		Logger:             pebbleLogger{cfg.Logger},
		FormatMajorVersion: pebble.FormatNewest,
		// Projections rewrite the same keys often (a delivery moves
		// between indexes within seconds): a large memtable absorbs those
		// writes before they reach a table.
		MemTableSize: 64 << 20,
		// No write-ahead log: the store is a cache of the log. A crash
		// loses the batches not flushed yet, with their checkpoints (they
		// are written in the same batches), and they are applied again
		// from the log on restart; Close flushes. Without it, every write
		// was written twice, and the log files held several times the
		// flushed state (every put, delete and rewrite, uncompressed).
		DisableWAL: true,
	}
	// Bloom filters: applying an outcome looks its delivery up, and
	// planning one checks that it is not there yet.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open projection store %s: %w", cfg.Dir, err)
	}
	return &Runner{
		log: l, db: db, logger: cfg.Logger, now: cfg.Now, closeFlushTimeout: cfg.CloseFlushTimeout, standbyDelay: cfg.StandbyDelay,
		owned:   events.NewPartitionSet(events.NoPartition),
		live:    events.NewPartitionSet(events.NoPartition),
		serving: events.AllPartitions(),
		notify:  make(chan struct{}), changed: make(chan struct{}, 1),
	}, nil
}

// Register adds p to the runner and returns its Store. Call it before Run.
// p starts from its checkpoint, or from the start of the log when it has
// none. A p that implements [Partitioned] applies the records of the node's
// partitions too.
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
	reg.part, _ = p.(Partitioned)
	r.projs = append(r.projs, reg)
	r.mainPos, _ = r.minCheckpoint(events.NewPartitionSet(events.NoPartition))
	return &Store{view: view{rd: r.db, prefix: reg.prefix}, r: r}, nil
}

// Registered registers p with r and hands p its Store through keep, then
// returns p: the closing steps of every projection's constructor, which
// keeps its Store in a field of its own. On an error of [Runner.Register]
// keep is not called and the zero P is returned.
func Registered[P Projection](r *Runner, p P, keep func(*Store)) (P, error) {
	s, err := r.Register(p)
	if err != nil {
		var zero P
		return zero, err
	}
	keep(s)
	return p, nil
}

// Own sets the delivery partitions this node owns (NoPartition is always
// included). Partitions it gains catch up from their checkpoints in a lane
// of their own and become live once they reach the main lane; partitions it
// loses stop being applied at once, and their state stays in the store,
// for a later return. Own may be called at any time, before or during Run.
func (r *Runner) Own(owned events.PartitionSet) {
	owned.Add(events.NoPartition)
	r.applyMu.Lock()
	r.mu.Lock()
	if owned == r.owned {
		r.mu.Unlock()
		r.applyMu.Unlock()
		return
	}
	gained, lost := owned.Minus(r.owned), r.owned.Minus(owned)
	r.owned = owned
	if !lost.IsEmpty() {
		// A lane skips the records of a partition the node does not own:
		// one that kept reading past them and owned the partition again
		// would skip them for good. Every running lane is stale; each
		// starts again from its partitions' checkpoints.
		r.epoch++
	}
	before := r.live
	r.live = r.live.Intersect(owned)
	live := r.live
	r.mu.Unlock()
	if live != before {
		r.partitionsChanged(live)
	}
	r.applyMu.Unlock()
	r.logger.Info("projection partitions changed",
		slog.Int("owned", owned.Len()-1), slog.String("gained", gained.String()), slog.String("lost", lost.String()))
	r.signalChange()
}

// Serve sets the partitions the node acts for: of the live ones, only
// those are passed to the partitioned projections' PartitionsChanged (the
// due index wakes their endpoints, the operational feed emits their
// entries). The others it owns are applied all the same, as a standby
// applies them, ready to be served without catching up. Until Serve is
// first called the node serves every partition it owns.
func (r *Runner) Serve(serving events.PartitionSet) {
	serving.Add(events.NoPartition)
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	if serving == r.serving {
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	// A partition served from now on has every record applied first, and
	// none of them counts as served (the outcome metrics); the others
	// stay held.
	r.releaseHeld("serve", serving)
	r.mu.Lock()
	r.serving = serving
	live := r.live
	r.mu.Unlock()
	r.partitionsChanged(live)
}

// Serving returns the partitions the node serves and has caught up:
// those passed to PartitionsChanged. NoPartition is included.
func (r *Runner) Serving() events.PartitionSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live.Intersect(r.serving)
}

// partitionsChanged tells the partitioned projections which live
// partitions the node serves; applyMu is held, mu is not.
func (r *Runner) partitionsChanged(live events.PartitionSet) {
	r.mu.Lock()
	served := live.Intersect(r.serving)
	r.mu.Unlock()
	for _, p := range r.projs {
		if p.part != nil {
			p.part.PartitionsChanged(served)
		}
	}
}

func (r *Runner) signalChange() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Owned returns the partitions the node owns, NoPartition included.
func (r *Runner) Owned() events.PartitionSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.owned
}

// Live returns the owned partitions that are caught up, NoPartition
// included: their records are applied as they come.
func (r *Runner) Live() events.PartitionSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.live
}

// Run applies the log to the projections until ctx ends (returning
// ctx.Err()) or the log or a projection fails. It may be called once.
func (r *Runner) Run(ctx context.Context) (err error) {
	r.mu.Lock()
	if r.started {
		r.mu.Unlock()
		return fmt.Errorf("run: %w", ErrRunning)
	}
	r.started = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stopped, r.runErr = true, err
		close(r.notify)
		r.notify = make(chan struct{})
		r.mu.Unlock()
	}()
	r.logger.Info("projections starting", "position", r.Applied().String())
	return r.runLanes(ctx)
}

// WaitFor returns once the main lane has applied the log up to pos
// (included): the records of no partition and those of every live
// partition, whether or not the event at pos concerned them. It waits for
// the runner's signal after each batch, without polling. It fails when ctx
// ends or when Run has returned (with an error wrapping [ErrStopped]).
func (r *Runner) WaitFor(ctx context.Context, pos events.Position) error {
	return r.WaitForPartitions(ctx, events.NewPartitionSet(events.NoPartition), pos)
}

// WaitForPartition returns once partition p is live on this node and the
// main lane has applied the log up to pos, the records of p it holds back
// (a standby's: see standby.go) included. It waits as long as the node
// does not own p (or p catches up), so bound ctx.
func (r *Runner) WaitForPartition(ctx context.Context, p events.Partition, pos events.Position) error {
	return r.WaitForPartitions(ctx, events.NewPartitionSet(p), pos)
}

// WaitForPartitions returns once every partition of ps is live on this
// node and the main lane has applied the log up to pos; see
// WaitForPartition.
func (r *Runner) WaitForPartitions(ctx context.Context, ps events.PartitionSet, pos events.Position) error {
	for {
		r.mu.Lock()
		applied, live, ch, stopped, runErr := r.mainPos, ps.Minus(r.live).IsEmpty(), r.notify, r.stopped, r.runErr
		r.mu.Unlock()
		if live && !applied.Less(pos) {
			r.Fresh(ps) // a standby's records held back count as read
			return nil
		}
		if stopped {
			return fmt.Errorf("wait for %s (applied %s): %w: %w", pos, applied, ErrStopped, runErr)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			if !live {
				return fmt.Errorf("wait for partitions %s at %s: %w: %w", ps, pos, ErrNotLive, ctx.Err())
			}
			return fmt.Errorf("wait for %s (applied %s): %w", pos, applied, ctx.Err())
		}
	}
}

// Applied returns the position up to which the main lane has applied the
// log: the records of no partition and those of the live partitions.
func (r *Runner) Applied() events.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mainPos
}

// flush flushes the memtables, waiting at most the configured timeout.
func (r *Runner) flush() error {
	done, err := r.db.AsyncFlush()
	if err != nil {
		return err
	}
	t := time.NewTimer(r.closeFlushTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
		return fmt.Errorf("flush did not finish within %v (is the directory still there?); its batches are applied again from the log at the next start", r.closeFlushTimeout)
	}
}

// Checkpoints returns each projection's checkpoint for the records of no
// partition, by name.
func (r *Runner) Checkpoints() map[string]events.Position {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := make(map[string]events.Position, len(r.projs))
	for _, p := range r.projs {
		m[p.name] = p.ckpt[events.NoPartition]
	}
	return m
}

// Stats are the runner's counts, for metrics.
type Stats struct {
	// Records counts the records applied to some projection since Open.
	Records uint64
	// Owned and Live count the delivery partitions the node follows (as
	// their owner, target or standby), and those of them caught up;
	// Served those it serves and has caught up.
	Owned, Live, Served int
}

// Stats returns the runner's counts.
func (r *Runner) Stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	served := r.live.Intersect(r.serving)
	served.Remove(events.NoPartition)
	return Stats{Records: r.records, Owned: r.owned.Len() - 1, Live: r.live.Len() - 1, Served: served.Len()}
}

// Lag is how far the projections are behind the log, for metrics and health.
type Lag struct {
	// Head is the log's last position; Applied the main lane's position.
	Head, Applied events.Position
	// Behind is Head.Commit - Applied.Commit, in the backend's position
	// units (events for the embedded log, bytes for EventStoreDB); 0 when
	// caught up.
	Behind uint64
	// Age is how long ago the last applied record was recorded, when behind;
	// 0 when caught up. It bounds from above how stale the projections are.
	Age time.Duration
	// Events counts the records applied to some projection since Open.
	Events uint64
	// Owned and Live count the delivery partitions the node owns, and those
	// of them caught up.
	Owned, Live int
}

// Lag compares the projections' position with the log's head.
func (r *Runner) Lag(ctx context.Context) (Lag, error) {
	head, err := r.log.Head(ctx)
	if err != nil {
		return Lag{}, fmt.Errorf("lag: %w", err)
	}
	r.mu.Lock()
	l := Lag{Head: head, Applied: r.mainPos, Events: r.records, Owned: r.owned.Len() - 1, Live: r.live.Len() - 1}
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
	// Without a write-ahead log, what is not flushed is not on disk; a
	// flush that cannot finish (the directory is gone) is given up, and
	// the log applies those batches again at the next start.
	ferr := r.flush()
	if err := r.db.Close(); err != nil || ferr != nil {
		return fmt.Errorf("close projection store: %w", errors.Join(ferr, err))
	}
	return nil
}

// minCheckpoint returns the smallest checkpoint of any projection in the
// partitions of s (a projection that is not partitioned counts only for
// NoPartition); false when there is none. r.mu must be held.
func (r *Runner) minCheckpoint(s events.PartitionSet) (events.Position, bool) {
	var m events.Position
	found := false
	for _, p := range r.projs {
		set := s
		if p.part == nil {
			set = s.Intersect(events.NewPartitionSet(events.NoPartition))
		}
		if c, ok := p.ckpt.min(set); ok && (!found || c.Less(m)) {
			m, found = c, true
		}
	}
	return m, found
}

func (r *Runner) checkpoint(name string) (checkpoints, error) {
	v, ok, err := view{rd: r.db}.Get(checkpointKey(name))
	if err != nil || !ok {
		return checkpoints{}, err
	}
	c, err := decodeCheckpoints(v)
	if err != nil {
		return checkpoints{}, fmt.Errorf("checkpoint of %s: %w", name, err)
	}
	return c, nil
}

// checkpointKey is "c" + name; projection data lives under "p" + name.
func checkpointKey(name string) []byte { return AppendString([]byte{'c'}, name) }

// filterOf is the union of the filters of projs, for the partitions parts:
// it lists stream prefixes and types only when every projection does.
func filterOf(projs []*registered, parts events.PartitionSet) events.Filter {
	var f events.Filter
	allPrefixes, allTypes := true, true
	for _, p := range projs {
		allPrefixes = allPrefixes && len(p.filter.StreamPrefixes) > 0
		allTypes = allTypes && len(p.filter.Types) > 0
		f.StreamPrefixes = append(f.StreamPrefixes, p.filter.StreamPrefixes...)
		f.Types = append(f.Types, p.filter.Types...)
	}
	if !allPrefixes {
		f.StreamPrefixes = nil
	}
	if !allTypes {
		f.Types = nil
	}
	slices.Sort(f.StreamPrefixes)
	f.StreamPrefixes = slices.Compact(f.StreamPrefixes)
	slices.Sort(f.Types)
	f.Types = slices.Compact(f.Types)
	f.Partitions = &parts
	return f
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
