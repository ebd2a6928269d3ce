package endpoint

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/google/uuid"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// loop is the delivery loop of one grain. Once the projections have
// applied the log up to its head (catchUp), whenever it is woken it pulls
// due deliveries (loop_pull.go, loop_planned.go) and holds them as flights
// (loop_flight.go): it reads each one's streams (loop_read.go), attempts it
// within the endpoint's limits (loop_limits.go, loop_lease.go, breaker.go,
// then a dispatcher slot: loop_slots.go, loop_attempt.go, attempt_build.go)
// and appends its outcome, with its lineage (loop_lineage.go), to the
// delivery stream (loop_record.go). A pull endpoint's consumer leases its
// ready flights instead (loop_pull_leases.go). It also carries out replays
// (loop_replay.go), skips of ordering keys' heads (loop_skip.go) and bulk
// recoveries (recovery.go), checkpoints its ordering keys' counts
// (loop_checkpoint.go), and hands its partition over (loop_handover.go). A
// delivery is never attempted before the time its stream says; a paused
// endpoint attempts and holds nothing; a deleted one ends its due
// deliveries without attempts.
//
// The grain creates the loop once its stream is loaded (newLoop) and
// passes it the loop's messages (receive), the one place that dispatches
// them. Its methods, and those of its parts, run on the actor, which owns
// it like the rest of the grain: every I/O runs off the mailbox (async)
// and comes back as a message.
type loop struct {
	// What the loop shares with its grain, which owns them: the
	// configuration, the endpoint id and logger, the state (the grain
	// applies the endpoint stream's events to it; the loop only reads it)
	// and the command core (whether the grain is stopping; stop it).
	cfg   *Config
	id    string
	log   *slog.Logger
	state *State
	core  *command.Core[*internalv1.EndpointCommand]
	// host appends the events the loop queued (own).
	host host

	// ctx ends when the grain stops; every goroutine the loop starts
	// derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// incarnation names this activation in the ids of its delivery events.
	incarnation string

	caughtUp     bool
	retryCatchUp bool               // waiting for the projections failed; try again
	flights      map[string]*flight // held deliveries, by id
	ready        []*flight          // flights waiting for the limits and a slot, new first
	reading      int                // flights whose streams are being read
	running      int                // attempts out
	pulling      bool
	wantPull     bool
	// settled are the deliveries whose outcome this activation appended,
	// with its position, until a pull that reflects that position: a pull
	// that read the index before the projections applied it may still
	// show them due.
	settled map[string]events.Position
	// behind is the latest position of an outcome a pull skipped because
	// the index did not reflect it yet: the next pull waits until the
	// projections have applied it, rather than read the same deliveries
	// again at once (a spin while the projections lag, as they do behind
	// a shared log).
	behind events.Position
	// stale are deliveries the index offered after the projections had
	// applied their outcome: their streams are always read first. Bounded
	// by maxStale; it holds anything only when the index missed an event.
	stale map[string]struct{}

	// busy counts the flights whose attempt the node's Drain counts
	// (flight.busy): retiring, the grain stops once it is 0.
	busy int

	breaker *Breaker
	limiter *rate.Limiter
	// own are the endpoint-stream events the loop decided (circuit
	// transitions, pause on 410, a recovery's progress), appended in order
	// by next.
	own  []proto.Message
	gone bool // a 410 paused the endpoint; its event may not be durable yet

	nextDue time.Time // earliest known time a held-back delivery is due
	timer   scheduler.CancelFunc
	timerAt time.Time

	// The loop's parts, each a receiver with its own state; those that
	// need more of the loop than that reach it through their l.
	slots    slots        // the node's attempt slots asked for (loop_slots.go)
	lease    leaseState   // the tenant's quota lease (loop_lease.go)
	holds    holds        // what held the next attempt in line (loop_lineage.go)
	leased   pullLeases   // a pull endpoint's leases to its consumer (loop_pull_leases.go)
	replays  replays      // replays (loop_replay.go)
	skips    skips        // skips of ordering keys' heads (loop_skip.go)
	ckpt     checkpointer // the ordering keys' counts (loop_checkpoint.go)
	recovery recoverer    // bulk recoveries (recovery.go, recovery_window.go)
	handover handover     // the partition's moves (loop_handover.go)
}

// host is the loop's grain, as the loop sees it; *grain satisfies it.
type host interface {
	// next appends the loop's own events, in order with the commands'
	// events, once the grain is ready for it.
	next(ctx actor.Context)
}

// newLoop returns the delivery loop of g, whose stream is loaded.
func newLoop(g *grain) *loop {
	c, cancel := context.WithCancel(context.Background())
	l := &loop{
		cfg: &g.cfg, id: g.id, log: g.log, state: g.state, core: g.core, host: g,
		ctx: c, cancel: cancel, incarnation: uuid.NewString(),
		flights: map[string]*flight{}, settled: map[string]events.Position{}, stale: map[string]struct{}{},
	}
	l.slots = slots{d: g.cfg.Dispatcher, state: g.state, id: g.id}
	l.lease = leaseState{l: l}
	l.leased = pullLeases{l: l}
	l.replays = replays{l: l}
	l.skips = skips{l: l}
	l.ckpt = checkpointer{l: l}
	l.recovery = recoverer{l: l}
	l.handover = handover{l: l, handed: map[string]struct{}{}}
	return l
}

// catchUp waits, off the mailbox, for the projections to reach the
// position Config.CatchUpTo gives (the log's head without one); the loop
// starts pulling once they have (onCaughtUp). A partition that is not live
// here within the I/O timeout is not this node's: the grain stops rather
// than wait for it (onCaughtUp).
func (l *loop) catchUp(ctx actor.Context) {
	to, proj, part := l.cfg.CatchUpTo, l.cfg.Projections, l.partition()
	if to == nil {
		log := l.cfg.Log
		to = func(c context.Context, _ events.Partition) (events.Position, error) { return log.Head(c) }
	}
	l.async(ctx, l.cfg.IOTimeout, func(c context.Context) any {
		pos, err := to(c, part)
		if err == nil {
			err = proj.WaitForPartition(c, part, pos)
		}
		return &caughtUp{err: err}
	})
}

// stop ends the loop's goroutines and gives back its slots.
func (l *loop) stop() {
	l.cancel()
	if l.timer != nil {
		l.timer()
		l.timer = nil
	}
	l.slots.leave()
	for _, f := range l.flights {
		l.letGo(f)
	}
}

// idle reports whether the loop holds nothing: no delivery, no I/O of its
// own, no recovery under way. A retry due later is not held: the due
// index's timers wake the grain for it.
func (l *loop) idle() bool {
	return l.caughtUp && len(l.flights) == 0 && !l.pulling && l.slots.asks == 0 && l.running == 0 &&
		len(l.own) == 0 && len(l.replays.waiting) == 0 && l.recovery.run == nil && !l.lease.asking && !l.ckpt.writing
}

// async runs fn off the mailbox and sends its result to the actor. The
// goroutine ends when fn returns: at the latest at timeout (0: none) or
// when the grain stops.
func (l *loop) async(ctx actor.Context, timeout time.Duration, fn func(context.Context) any) {
	root, self, parent, tasks := ctx.ActorSystem().Root, ctx.Self(), l.ctx, l.cfg.Tasks
	if tasks != nil {
		tasks.Add(1)
	}
	go func() {
		if tasks != nil {
			defer tasks.Done()
		}
		c, cancel := parent, context.CancelFunc(func() {})
		if timeout > 0 {
			c, cancel = context.WithTimeout(parent, timeout)
		}
		defer cancel()
		res := fn(c)
		if parent.Err() == nil {
			root.Send(self, res)
		}
	}()
}

// The loop's messages to its own actor.
type (
	caughtUp  struct{ err error }
	loopTick  struct{}
	pulledDue struct {
		items  []due.Item
		limit  int             // asked for: fewer answered means none left
		waited events.Position // what the projections had applied when the pull read the index
		err    error
	}
)

// receive handles the loop's messages, for the loop or one of its parts:
// the one place that dispatches them. The grain passes it every message
// that is not its own.
func (l *loop) receive(ctx actor.Context, msg any) {
	if l.handover.retiring && !l.handover.retiringWork(msg) {
		if !l.core.Stopping() {
			l.handover.retireStep(ctx)
		}
		return
	}
	switch m := msg.(type) {
	case *caughtUp:
		l.onCaughtUp(ctx, m)
	case loopTick:
		l.timer, l.timerAt = nil, time.Time{}
		if !l.nextDue.After(l.cfg.Now()) {
			l.nextDue = time.Time{}
		}
		l.wantPull = true
		l.pump(ctx)
	case *pulledDue:
		l.onPulled(ctx, m)
	case *Planned:
		l.onPlanned(ctx, m)
	case *readDone:
		l.onRead(ctx, m)
	case *slotGranted:
		l.onSlot(ctx)
	case *attemptDone:
		l.onAttempt(ctx, m)
	case *recorded:
		l.onRecorded(ctx, m)
	case *leaseReply:
		l.lease.onReply(ctx, m)
	case *recoverPage:
		l.recovery.onPage(ctx, m)
	case *recoverList:
		l.recovery.onList(ctx, m)
	case *recoverBatch:
		l.recovery.onBatch(ctx, m)
	case *elsewhereChecked:
		l.handover.onElsewhereChecked(ctx, m)
	case *checkpointed:
		l.ckpt.onWritten(ctx, m)
	}
}

// onCaughtUp starts pulling once the projections have caught up, or
// tries again in a second.
func (l *loop) onCaughtUp(ctx actor.Context, m *caughtUp) {
	if errors.Is(m.err, projections.ErrNotLive) {
		l.log.Warn("endpoint grain's partition is not live on this node; stopping", "error", m.err)
		l.core.Stop(ctx, internalv1.GrainError_CODE_UNAVAILABLE, "the endpoint's partition is not served on this node now; retry")
		return
	}
	if m.err != nil {
		l.log.Error("endpoint grain cannot wait for the projections; retrying", "error", m.err)
		l.arm(ctx, l.cfg.Now().Add(time.Second))
		l.caughtUp = false
		l.retryCatchUp = true
		return
	}
	l.caughtUp = true
	l.wantPull = true
	l.handover.awaitPredecessor(ctx)
	l.skips.startWaiting(ctx)
	l.recovery.resume(ctx)
	l.pump(ctx)
}

// wake asks for a pull: a Wake, a resume, a command that changed the
// endpoint.
func (l *loop) wake(ctx actor.Context) {
	l.wantPull = true
	l.handover.checkElsewhere(ctx)
	l.pump(ctx)
}

// ownRecorded continues once the loop's own events are durable: a pause
// is durable now (a resume clears it), and the loop goes on.
func (l *loop) ownRecorded(ctx actor.Context) {
	if l.state.Status != controlv1.Endpoint_STATUS_ACTIVE {
		l.gone = false
	}
	l.pump(ctx)
}

// attempting reports whether the endpoint may push an attempt now: a pull
// endpoint's consumer takes its ready deliveries instead (a slot asked for
// before a switch to pull goes back unused).
func (l *loop) attempting() bool {
	return !l.handover.retiring && !l.state.Config.GetPull() && l.state.Live() && l.state.Status == controlv1.Endpoint_STATUS_ACTIVE && !l.gone && !l.cfg.Drain.Draining(l.id)
}

// paused reports whether the endpoint exists and is paused or disabled: it
// holds nothing and pulls nothing until it resumes.
func (l *loop) paused() bool {
	return l.state.Live() && (l.state.Status != controlv1.Endpoint_STATUS_ACTIVE || l.gone)
}

// maxInFlight is the endpoint's in-flight limit: its own, or the node's
// default.
func (l *loop) maxInFlight() int {
	if n := l.state.Config.GetMaxInFlight(); n > 0 {
		return int(n)
	}
	return l.cfg.MaxInFlight
}

// capacity is how many flights the grain holds at most: a pull's worth
// beyond its in-flight limit.
func (l *loop) capacity() int { return l.cfg.PullLimit + l.maxInFlight() }

// pump settles what the endpoint's status decides, starts what the limits
// allow, pulls when asked to and the flights run low, and arms the timer
// for the next moment something may change.
func (l *loop) pump(ctx actor.Context) {
	if l.core.Stopping() || !l.core.Loaded() {
		return
	}
	if l.handover.retiring {
		l.handover.retireStep(ctx)
		return
	}
	if !l.caughtUp {
		if l.retryCatchUp {
			l.retryCatchUp = false
			l.catchUp(ctx)
		}
		return
	}
	if !l.state.Created {
		return
	}
	now := l.cfg.Now()
	l.holds.set(now, holdNone) // startReady says what holds it now
	switch {
	case l.state.Deleted:
		l.endReady(ctx) // every held delivery ends: endpoint gone
	case l.paused():
		l.releaseReady() // held back until the endpoint resumes
	}
	if l.recovery.run != nil && (!l.state.Live() || l.state.Status != controlv1.Endpoint_STATUS_ACTIVE) {
		l.recovery.finish(hooklinev1.RecoveryFinished_REASON_ENDPOINT_NOT_ACTIVE)
	}
	l.replays.startWaiting(ctx)
	if until := l.cfg.Quarantine.Until(l.id, now); !until.IsZero() {
		l.arm(ctx, until)
		return
	}
	var wake, handedOver time.Time
	if l.handover.elsewhere > 0 {
		handedOver = l.handover.expireElsewhere(now)
	}
	if l.leased.count > 0 {
		// Whatever the mode: a lease handed out before a switch to push
		// ends too, and push takes its delivery from there.
		wake = l.leased.expire(ctx, now)
	}
	if l.attempting() {
		wake = earliestOf(wake, l.startReady(ctx, now))
	}
	wake = earliestOf(wake, handedOver)
	if l.wantPull && !l.pulling && !l.paused() && l.lowOnWork() {
		l.pull(ctx)
	}
	if !l.nextDue.IsZero() && (wake.IsZero() || l.nextDue.Before(wake)) {
		wake = l.nextDue
	}
	if !wake.IsZero() {
		l.arm(ctx, wake)
	}
	l.ckpt.write(ctx, now, false)
	if len(l.own) > 0 {
		l.host.next(ctx)
	}
}

// arm sets the loop's timer for at, unless it is set for earlier. The
// delay is measured on the injected clock and capped, so that a clock that
// moves differently is noticed within maxTimer.
func (l *loop) arm(ctx actor.Context, at time.Time) {
	if l.timer != nil && !l.timerAt.After(at) {
		return
	}
	if l.timer != nil {
		l.timer()
	}
	delay := min(max(at.Sub(l.cfg.Now()), time.Millisecond), maxTimer)
	l.timerAt = at
	l.timer = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(delay, ctx.Self(), loopTick{})
}

// noteDue remembers that a held-back delivery is due at at (zero: none),
// for the timer.
func (l *loop) noteDue(at time.Time) {
	if !at.IsZero() && (l.nextDue.IsZero() || at.Before(l.nextDue)) {
		l.nextDue = at
	}
}

// queueOwn adds an event for the endpoint stream; next appends it, in
// order with the commands' events, when pump ends.
func (l *loop) queueOwn(ev proto.Message) {
	if l.handover.retiring {
		return // the endpoint stream is the new owner's grain's to append to
	}
	l.own = append(l.own, ev)
}

// earliestOf returns the earlier of two times, zero meaning none.
func earliestOf(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
