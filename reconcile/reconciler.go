package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// Defaults of the zero Config.
const (
	DefaultNotPulledAfter = time.Minute
	DefaultDeadline       = 24 * time.Hour
	DefaultRetention      = history.DefaultRetention
)

// Pulls tells when an endpoint's grain last pulled its due work.
// The node's pull tracker (cluster) satisfies it.
type Pulls interface {
	LastPull(endpointID string) time.Time
}

// StreamArchive is what the archive check asks of an archive.
type StreamArchive interface {
	Has(ctx context.Context, stream string) (bool, error)
}

// Config configures a [Reconciler]. Log is required; [Reconciler.Part]
// also needs the node's projections (Runner, Registry, Due, History). The
// zero value of every other field means its documented default.
type Config struct {
	// Log is the log, the truth.
	Log events.Log
	// Node names this node in reports and in its repairs' stream; "" means
	// "local".
	Node string
	// Runner, Registry, Due and History are the node's projections.
	Runner   *projections.Runner
	Registry *registry.Registry
	Due      *due.Due
	History  *history.History
	// LogRetention is the log's: what was planned before now minus it may
	// be gone from the log (to Archive, when set), so it is compared only
	// with the archive; 0 means Retention (the log keeps what the history
	// does).
	LogRetention time.Duration
	// Archive, when set, is checked for every delivery the history holds
	// that the log's retention dropped: its event must be there (check
	// archive).
	Archive StreamArchive
	// Payloads opens sealed payloads for the filters of a re-plan; an
	// erased one is expected, not a fault: its deliveries are filtered
	// out. Nil: payloads in clear only.
	Payloads *seal.Payloads
	// Offline says that the node is stopped (its store is reconciled by
	// hookline reconcile --data): the registry may then be rebuilt, which
	// a serving node never does (publish reads it).
	Offline bool
	// Pulls tells when grains last pulled; nil when no grain runs (a
	// stopped node): due_not_pulled is then not checked.
	Pulls Pulls
	// Wake wakes an endpoint's grain, to repair due work nobody pulls; nil
	// means those are not repaired.
	Wake func(ctx context.Context, endpointID string) error
	// Started is when the node started: pulls are known since then. Zero
	// means when the Reconciler was made.
	Started time.Time
	// NotPulledAfter is how long due work may wait on an endpoint whose
	// grain does not pull before it is reported; 0 means
	// DefaultNotPulledAfter (a run may ask for another).
	NotPulledAfter time.Duration
	// Deadline ends the automatic retries of a re-planned delivery, from
	// the repair; 0 means DefaultDeadline (24 h, the publish's).
	Deadline time.Duration
	// Retention is the history's: deliveries planned before now minus
	// Retention (plus a day of margin) are not compared, the history
	// having pruned them or about to. 0 means DefaultRetention.
	Retention time.Duration
	// RebuildTimeout bounds the wait for a rebuilt projection to catch up
	// within a repair run; 0 means 5 minutes.
	RebuildTimeout time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	var errs []error
	if c.Log == nil {
		errs = append(errs, errors.New("log is required"))
	}
	if c.NotPulledAfter < 0 || c.Deadline < 0 || c.Retention < 0 || c.RebuildTimeout < 0 {
		errs = append(errs, errors.New("durations must not be negative"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("reconcile config: %w", err)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.Node = cmp.Or(c.Node, "local")
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Started.IsZero() {
		c.Started = c.Now()
	}
	c.NotPulledAfter = cmp.Or(c.NotPulledAfter, DefaultNotPulledAfter)
	c.Deadline = cmp.Or(c.Deadline, DefaultDeadline)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.RebuildTimeout = cmp.Or(c.RebuildTimeout, 5*time.Minute)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Reconciler compares the log with what a node holds. Plans and Part may
// run concurrently; it is safe for concurrent use.
type Reconciler struct {
	cfg Config
}

// New returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Reconciler{cfg: cfg.withDefaults()}, nil
}

// Run says what one reconcile run does; the node that is asked fills it
// and hands it to every part.
type Run struct {
	// ID names the run; its repairs go to the streams reconcile-{ID}.*.
	ID string
	// Head is the log position reconciled.
	Head   events.Position
	Repair bool
	// MaxListed bounds the discrepancies listed; 0 means DefaultMaxListed.
	MaxListed int
	// NotPulledAfter overrides Config.NotPulledAfter when set.
	NotPulledAfter time.Duration
	SkipReplay     bool
	IssuedBy       *hooklinev1.Actor
}

// RunOf reads a run from a node's request.
func RunOf(m *internalv1.ReconcilePart) Run {
	return Run{
		ID: m.GetRunId(), Head: events.Position{Commit: m.GetHeadCommit(), Prepare: m.GetHeadPrepare()},
		Repair: m.GetRepair(), MaxListed: int(m.GetMaxListed()), NotPulledAfter: time.Duration(m.GetNotPulledAfterMs()) * time.Millisecond,
		SkipReplay: m.GetSkipReplay(), IssuedBy: m.GetIssuedBy(),
	}
}

// Part returns run as a node's request.
func (run Run) Part() *internalv1.ReconcilePart {
	return &internalv1.ReconcilePart{
		RunId: run.ID, HeadCommit: run.Head.Commit, HeadPrepare: run.Head.Prepare, Repair: run.Repair,
		MaxListed: int32(run.MaxListed), NotPulledAfterMs: run.NotPulledAfter.Milliseconds(), SkipReplay: run.SkipReplay,
		IssuedBy: run.IssuedBy,
	}
}

// auditor appends one writer's repairs of a run to its own stream,
// reconcile-{run}.{writer}, in order. It is safe for concurrent use.
type auditor struct {
	log    events.Log
	run    Run
	node   string
	stream string
	now    func() time.Time

	mu     sync.Mutex // guards rev, exists
	rev    events.Revision
	exists bool
}

func (r *Reconciler) auditor(run Run, writer string) *auditor {
	return &auditor{log: r.cfg.Log, run: run, node: r.cfg.Node, now: r.cfg.Now,
		stream: events.ReconcileStream(run.ID + "." + streamSafe(writer))}
}

// record appends a repair with its reason.
func (a *auditor) record(ctx context.Context, ev *hooklinev1.ReconcileRepaired) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	ev.RunId, ev.Node, ev.IssuedBy, ev.At = a.run.ID, a.node, a.run.IssuedBy, timestamppb.New(a.now())
	n := 0
	if a.exists {
		n = int(a.rev) + 1
	}
	e, err := events.Encode(ev, fmt.Sprintf("reconcile/%s/%d", a.run.ID, n), a.stream)
	if err != nil {
		return err
	}
	res, err := a.log.Append(ctx, a.stream, events.ExpectAfter(a.rev, a.exists), e)
	if err != nil {
		return fmt.Errorf("record repair in %s: %w", a.stream, err)
	}
	a.rev, a.exists = res.Revision, true
	return nil
}

// streamSafe keeps the characters of s that a stream id may hold.
func streamSafe(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			return r
		}
		return '_'
	}, s)
}

// system is the actor of repairs no caller asked for.
var system = &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "reconcile"}
