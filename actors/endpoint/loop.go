package endpoint

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"github.com/google/uuid"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The delivery loop.
//
// On activation, once its stream is loaded, the grain reads the log's head
// and waits (off the mailbox) until the node's projections of its delivery
// partition have applied it (the partition live on this node: the cluster
// places the grain on the partition's owner): the due index then reflects
// every outcome a previous activation wrote. From then on, whenever it is
// woken (a Wake, its timer for the next known due time, the breaker's or
// the token bucket's next opening, and after each outcome) it pulls due
// deliveries and holds them as flights, as many as keep its limits busy:
// it reads each one's delivery stream (its revision, attempt count and
// next attempt time: the truth when the index lags) and the published
// event (the payload, cached for the node), then attempts it within the
// limits, in this order: endpoint status, in-flight limit, tenant lease,
// circuit breaker, token bucket, and a slot from the node's dispatcher.
// Attempts run off the mailbox and come back as messages; each outcome is
// appended to the delivery stream with the revision the flight holds.
//
// A publish on the grain's node also hands it the deliveries it planned for
// it (Planned, see planned.go), which it takes at once while the
// projections have not applied that plan yet: a first attempt then does not
// wait for the projections, which apply the log in order, behind whatever
// another tenant published just before.
//
// A delivery is never attempted before the time its stream says. A pull
// reads the due index at once and notes the position the projections had
// applied when it began; it skips every delivery the grain settled past
// that position (the index may show it as it was before that outcome). A
// first attempt of a new delivery skips the read of its stream (there is
// nothing in it yet): its outcome is appended with expected revision "no
// stream", and if the stream exists after all it is read then and the
// outcome settled against it (see record.go). A delivery the index offers
// although the projections applied the grain's outcome for it (the index
// missed an event: a fault that reconcile reports) is never taken for new:
// its stream is read first, so the fault costs a read, not a second
// request to the receiver.
//
// Status: a paused or disabled endpoint attempts nothing, holds nothing
// and does not pull; its deliveries stay due (those past their deadline
// expire on resume, and no attempt starts past its deadline). A deleted
// endpoint ends every due delivery, held or not, as failed with a terminal
// AttemptFailed of ERROR_CLASS_ENDPOINT_GONE and no HTTP attempt, so that
// its deliveries do not stay due forever and the counts add up.

// loop is the delivery loop's state. It is owned by the actor, like the
// rest of the grain.
type loop struct {
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
	asks         int                // slots asked of the dispatcher, not granted yet
	probeAsked   bool               // one of the asks is the breaker's half-open probe
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

	breaker *Breaker
	limiter *rate.Limiter
	lease   leaseState
	// holds adds up what held the next attempt in line (lineage.go).
	holds holds
	// own are the endpoint-stream events the loop decided (circuit
	// transitions, pause on 410, a recovery's progress), appended in order
	// by next.
	own  []proto.Message
	gone bool // a 410 paused the endpoint; its event may not be durable yet

	nextDue time.Time // earliest known time a held-back delivery is due
	timer   scheduler.CancelFunc
	timerAt time.Time

	// replays are replay orders waiting for room among the flights.
	replays []*replayOrder
	// recovery is the recovery this activation is carrying out, if any;
	// finished, the last one it finished (for its count of attempts).
	recovery, finished *recoveryRun
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

func (g *grain) loopOn() bool { return g.cfg.Due != nil }

// startLoop begins the delivery loop once the stream is loaded: it waits,
// off the mailbox, for the projections to reach the log's head.
func (g *grain) startLoop(ctx actor.Context) {
	if !g.loopOn() {
		return
	}
	if g.loop == nil {
		c, cancel := context.WithCancel(context.Background())
		g.loop = &loop{ctx: c, cancel: cancel, incarnation: uuid.NewString(), flights: map[string]*flight{}, settled: map[string]events.Position{}, stale: map[string]struct{}{}}
	}
	log, proj, part := g.cfg.Log, g.cfg.Projections, g.partition()
	g.async(ctx, 0, func(c context.Context) any {
		head, err := log.Head(c)
		if err == nil {
			err = proj.WaitForPartition(c, part, head)
		}
		return &caughtUp{err: err}
	})
}

// stopLoop ends the loop's goroutines and gives back its slots.
func (g *grain) stopLoop() {
	l := g.loop
	if l == nil {
		return
	}
	l.cancel()
	if l.timer != nil {
		l.timer()
		l.timer = nil
	}
	if g.cfg.Dispatcher != nil && g.state != nil {
		g.cfg.Dispatcher.Leave(g.state.TenantID, g.id)
	}
}

// idle reports whether the loop holds nothing: no delivery, no I/O of its
// own, no recovery under way. A retry due later is not held: the due
// index's timers wake the grain for it.
func (l *loop) idle() bool {
	return l.caughtUp && len(l.flights) == 0 && !l.pulling && l.asks == 0 && l.running == 0 &&
		len(l.own) == 0 && len(l.replays) == 0 && l.recovery == nil && !l.lease.asking
}

// async runs fn off the mailbox and sends its result to the actor. The
// goroutine ends when fn returns: at the latest at timeout (0: none) or
// when the grain stops.
func (g *grain) async(ctx actor.Context, timeout time.Duration, fn func(context.Context) any) {
	root, self, parent := ctx.ActorSystem().Root, ctx.Self(), g.loop.ctx
	if g.cfg.Tasks != nil {
		g.cfg.Tasks.Add(1)
	}
	go func() {
		if g.cfg.Tasks != nil {
			defer g.cfg.Tasks.Done()
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

// receiveLoop handles the loop's messages; it reports whether msg was one.
func (g *grain) receiveLoop(ctx actor.Context, msg any) bool {
	if g.loop == nil {
		return false
	}
	switch m := msg.(type) {
	case *caughtUp:
		g.onCaughtUp(ctx, m)
	case loopTick:
		g.loop.timer, g.loop.timerAt = nil, time.Time{}
		if !g.loop.nextDue.After(g.cfg.Now()) {
			g.loop.nextDue = time.Time{}
		}
		g.loop.wantPull = true
		g.pump(ctx)
	case *pulledDue:
		g.onPulled(ctx, m)
	case *Planned:
		g.onPlanned(ctx, m)
	case *readDone:
		g.onRead(ctx, m)
	case *slotGranted:
		g.onSlot(ctx)
	case *attemptDone:
		g.onAttempt(ctx, m)
	case *recorded:
		g.onRecorded(ctx, m)
	case *leaseReply:
		g.onLease(ctx, m)
	case *recoverPage:
		g.onRecoverPage(ctx, m)
	case *recoverList:
		g.onRecoverList(ctx, m)
	case *recoverBatch:
		g.onRecoverBatch(ctx, m)
	default:
		return false
	}
	return true
}

func (g *grain) onCaughtUp(ctx actor.Context, m *caughtUp) {
	if m.err != nil {
		g.log.Error("endpoint grain cannot wait for the projections; retrying", "error", m.err)
		g.arm(ctx, g.cfg.Now().Add(time.Second))
		g.loop.caughtUp = false
		g.loop.retryCatchUp = true
		return
	}
	g.loop.caughtUp = true
	g.loop.wantPull = true
	g.resumeRecovery(ctx)
	g.pump(ctx)
}

// wakeLoop asks for a pull: a Wake, a resume, a command that changed the
// endpoint.
func (g *grain) wakeLoop(ctx actor.Context) {
	if g.loop == nil {
		return
	}
	g.loop.wantPull = true
	g.pump(ctx)
}

// attempting reports whether the endpoint may attempt now.
func (g *grain) attempting() bool {
	return g.state.Live() && g.state.Status == controlv1.Endpoint_STATUS_ACTIVE && !g.loop.gone && !g.cfg.Drain.Draining()
}

// paused reports whether the endpoint exists and is paused or disabled: it
// holds nothing and pulls nothing until it resumes.
func (g *grain) paused() bool {
	return g.state.Live() && (g.state.Status != controlv1.Endpoint_STATUS_ACTIVE || g.loop.gone)
}

func (g *grain) maxInFlight() int {
	if n := g.state.Config.GetMaxInFlight(); n > 0 {
		return int(n)
	}
	return g.cfg.MaxInFlight
}

// capacity is how many flights the grain holds at most: a pull's worth
// beyond its in-flight limit.
func (g *grain) capacity() int { return g.cfg.PullLimit + g.maxInFlight() }

// pump settles what the endpoint's status decides, starts what the limits
// allow, pulls when asked to and the flights run low, and arms the timer
// for the next moment something may change.
func (g *grain) pump(ctx actor.Context) {
	l := g.loop
	if l == nil || g.core.Stopping() || !g.core.Loaded() {
		return
	}
	if !l.caughtUp {
		if l.retryCatchUp {
			l.retryCatchUp = false
			g.startLoop(ctx)
		}
		return
	}
	if !g.state.Created {
		return
	}
	now := g.cfg.Now()
	l.holds.set(now, holdNone) // startReady says what holds it now
	switch {
	case g.state.Deleted:
		g.endReady(ctx) // every held delivery ends: endpoint gone
	case g.paused():
		g.releaseReady() // held back until the endpoint resumes
	}
	if l.recovery != nil && (!g.state.Live() || g.state.Status != controlv1.Endpoint_STATUS_ACTIVE) {
		g.finishRecovery(hooklinev1.RecoveryFinished_REASON_ENDPOINT_NOT_ACTIVE)
	}
	g.startReplays(ctx)
	if q := g.cfg.Quarantine; q != nil {
		if until := q.Until(g.id, now); !until.IsZero() {
			g.arm(ctx, until)
			return
		}
	}
	var wake time.Time
	if g.attempting() {
		wake = g.startReady(ctx, now)
	}
	if l.wantPull && !l.pulling && !g.paused() && g.lowOnWork() {
		g.pull(ctx)
	}
	if !l.nextDue.IsZero() && (wake.IsZero() || l.nextDue.Before(wake)) {
		wake = l.nextDue
	}
	if !wake.IsZero() {
		g.arm(ctx, wake)
	}
	if len(l.own) > 0 {
		g.next(ctx)
	}
}

// lowOnWork reports whether the grain should pull: it holds fewer
// deliveries waiting to start (being read, or ready) than its in-flight
// limit, and has room for more. An endpoint that cannot start what it holds
// (a hanging receiver, an open circuit, no slot) does not scan the due
// index on every wake: it pulls again once its deliveries move. Retries
// waiting for a slot do not count: the dispatcher may hold them back while
// new work on the node is late, and this endpoint's new work must be
// pulled past them.
func (g *grain) lowOnWork() bool {
	l := g.loop
	waiting := l.reading + len(l.ready)
	for _, f := range l.ready[:min(l.asks, len(l.ready))] {
		if f.class() == due.ClassRetry {
			waiting--
		}
	}
	return len(l.flights) < g.capacity() && waiting < g.maxInFlight()
}

// endReady ends the ready flights of a deleted endpoint.
func (g *grain) endReady(ctx actor.Context) {
	ready := g.loop.ready
	g.loop.ready = nil
	for _, f := range ready {
		g.settle(ctx, f)
	}
}

// releaseReady lets go of the ready flights of a paused endpoint: they stay
// due in the index, and are pulled (and checked against their deadline)
// again on resume.
func (g *grain) releaseReady() {
	ready := g.loop.ready
	g.loop.ready = nil
	for _, f := range ready {
		g.drop(nil, f)
	}
}

// startReady asks for slots for the ready flights while the limits allow;
// it returns when a limit that opens with time will open (zero if none).
// Slots are not bound to flights: a granted slot goes to the first ready
// flight then (new deliveries first), so a retry waiting for a slot never
// holds back a new delivery.
func (g *grain) startReady(ctx actor.Context, now time.Time) time.Time {
	l := g.loop
	if l.breaker == nil {
		l.breaker = NewBreaker(g.cfg.Breaker, g.state)
	}
	g.tuneLimiter(now)
	g.promote()
	for l.asks < len(l.ready) {
		if l.asks+l.running >= g.maxInFlight() {
			l.holds.set(now, holdInFlight)
			return time.Time{} // an outcome pumps again
		}
		if ok, retry := g.leaseAllows(ctx, now); !ok {
			l.holds.set(now, holdQuota)
			return retry
		}
		ok, ev := l.breaker.Allow(now)
		if ev != nil {
			g.queueOwn(ev)
		}
		if !ok {
			l.holds.set(now, holdBreaker)
			return l.breaker.Until()
		}
		probe := l.breaker.Probing()
		r := l.limiter.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			if probe {
				l.breaker.Cancel()
			}
			l.holds.set(now, holdRate)
			return now.Add(max(d, 10*time.Millisecond))
		}
		l.holds.set(now, holdNone)
		g.askedLineage(l.ready[l.asks], now)
		c := l.ready[l.asks].class()
		l.asks++
		l.probeAsked = l.probeAsked || probe
		g.useLease()
		g.acquire(ctx, c)
		if probe {
			if l.asks < len(l.ready) {
				l.holds.set(now, holdBreaker) // half-open: the probe is out
			}
			return time.Time{} // one probe; its outcome pumps again
		}
	}
	return time.Time{}
}

// promote turns the grain's slot requests for retries into requests for
// new work when new deliveries are ready: the dispatcher serves new work
// first, and holds retries back while new work anywhere on the node is
// late, so a retry's request must not stand in for a new delivery's.
func (g *grain) promote() {
	l := g.loop
	if g.cfg.Dispatcher == nil || l.asks == 0 {
		return
	}
	news := 0
	for _, f := range l.ready[:min(l.asks, len(l.ready))] {
		if f.class() == due.ClassNew {
			news++
		}
	}
	if news > 0 {
		g.cfg.Dispatcher.Promote(g.state.TenantID, g.id, news)
	}
}

// tuneLimiter builds the token bucket, or follows a change of the
// endpoint's rate or burst.
func (g *grain) tuneLimiter(now time.Time) {
	r, b := g.rate()
	if g.loop.limiter == nil {
		g.loop.limiter = rate.NewLimiter(rate.Limit(r), b)
		return
	}
	if g.loop.limiter.Limit() != rate.Limit(r) {
		g.loop.limiter.SetLimitAt(now, rate.Limit(r))
	}
	if g.loop.limiter.Burst() != b {
		g.loop.limiter.SetBurstAt(now, b)
	}
}

// behindWait bounds a pull's wait for the projections to apply what the
// grain settled after its last pull.
const behindWait = 2 * time.Second

// pull asks the due index for the endpoint's due deliveries, off the
// mailbox, without waiting for the projections to apply the grain's own
// appends: the index reflects at least the position the projections had
// applied when the pull began, and onPulled skips what the grain settled
// after it. (Waiting made an endpoint's pulls queue behind whatever the
// projections were applying, another tenant's burst of plans included.)
func (g *grain) pull(ctx actor.Context) {
	l := g.loop
	l.pulling, l.wantPull = true, false
	idx, proj, now, part := g.cfg.Due, g.cfg.Projections, g.cfg.Now, g.partition()
	id, limit, behind := g.id, g.cfg.PullLimit+len(l.flights), l.behind
	l.behind = events.Start
	g.async(ctx, g.cfg.IOTimeout, func(c context.Context) any {
		if !behind.IsStart() {
			// Wait a little for the projections to pass what the last pull
			// found settled since, then pull anyway: while they lag far
			// behind (a node at its limit), the pull still brings the new
			// work the index has, and skips what the grain settled.
			wctx, cancel := context.WithTimeout(c, behindWait)
			err := proj.WaitForPartition(wctx, part, behind)
			cancel()
			if err != nil && (c.Err() != nil || !errors.Is(err, context.DeadlineExceeded)) {
				return &pulledDue{err: err}
			}
		}
		applied := proj.Applied() // before the read: the index reflects at least this
		items, err := idx.Pull(id, now(), limit)
		return &pulledDue{items: items, limit: limit, waited: applied, err: err}
	})
}

// onPulled holds the pulled deliveries while the limits need more work.
// The grain pulls again when it is woken (the due index wakes it when it
// adds work for it, and when a retry falls due), or when this pull may have
// left work behind (it got all it asked for, or stopped for lack of room),
// not after every outcome: an endpoint with nothing due must not scan the
// index each time an attempt ends.
func (g *grain) onPulled(ctx actor.Context, m *pulledDue) {
	l := g.loop
	l.pulling = false
	if m.err != nil {
		switch {
		case errors.Is(m.err, due.ErrNotLive):
			// The partition moved away: the placement stops this grain
			// and the new owner's activation takes over.
			g.log.Info("endpoint grain's partition is not served here; waiting", "error", m.err)
		case !errors.Is(m.err, context.Canceled):
			g.log.Warn("endpoint grain cannot pull due deliveries; retrying", "error", m.err)
		}
		g.arm(ctx, g.cfg.Now().Add(time.Second))
		return
	}
	if len(m.items) >= m.limit {
		l.wantPull = true // the index may hold more
	}
	for _, it := range m.items {
		if _, held := l.flights[it.DeliveryID]; held || it.EndpointID != g.id {
			continue
		}
		at, settled := l.settled[it.DeliveryID]
		if settled && m.waited.Less(at) {
			// The pull was issued before this delivery's outcome was
			// appended: the index showed it as it was before.
			g.log.Debug("a pull returned a delivery settled since; skipped", "delivery_id", it.DeliveryID)
			if l.behind.Less(at) {
				l.behind = at
			}
			continue
		}
		_, stale := l.stale[it.DeliveryID]
		if settled && !stale && it.Class == due.ClassNew && it.Attempts == 0 && !it.Manual && len(l.stale) < maxStale {
			// The projections applied this outcome, yet the index offers
			// the delivery as it was before: it missed an event.
			g.log.Warn("the due index offers a delivery whose outcome the projections applied; its stream is read before any attempt (hookline reconcile reports the index)", "delivery_id", it.DeliveryID)
			l.stale[it.DeliveryID], stale = struct{}{}, true
		}
		if !g.lowOnWork() {
			l.wantPull = true // more after some progress
			break
		}
		f := &flight{item: it, suspect: stale}
		l.flights[it.DeliveryID] = f
		g.read(ctx, f)
	}
	if len(m.items) < m.limit || len(l.settled) > maxSettled {
		// The pull saw every delivery due now: what it did not return
		// the index has settled. (A full pull may have left out one
		// the index missed; the entries are kept, up to maxSettled.)
		for id, at := range l.settled {
			if !m.waited.Less(at) {
				delete(l.settled, id)
			}
		}
	}
	g.pump(ctx)
}

// maxStale bounds the deliveries a grain remembers the index to have
// missed an event of; maxSettled the settled deliveries it keeps across
// full pulls.
const (
	maxStale   = 4096
	maxSettled = 16384
)

// enqueue puts a flight among the ready ones: new deliveries first, then
// by due time.
func (g *grain) enqueue(f *flight) {
	f.stage = stageReady
	l := g.loop
	g.readyLineage(f, g.cfg.Now())
	i, _ := slices.BinarySearchFunc(l.ready, f, func(a, b *flight) int {
		if ca, cb := a.class(), b.class(); ca != cb {
			return int(ca) - int(cb)
		}
		if c := a.item.DueAt.Compare(b.item.DueAt); c != 0 {
			return c
		}
		return -1 // after the equal ones: stable
	})
	l.ready = slices.Insert(l.ready, i, f)
}

// noteDue remembers that a held-back delivery is due at at, for the timer.
func (g *grain) noteDue(at time.Time) {
	if l := g.loop; l.nextDue.IsZero() || at.Before(l.nextDue) {
		l.nextDue = at
	}
}

// arm sets the loop's timer for at, unless it is set for earlier. The
// delay is measured on the injected clock and capped, so that a clock that
// moves differently is noticed within maxTimer.
func (g *grain) arm(ctx actor.Context, at time.Time) {
	l := g.loop
	if l.timer != nil && !l.timerAt.After(at) {
		return
	}
	if l.timer != nil {
		l.timer()
	}
	delay := min(max(at.Sub(g.cfg.Now()), time.Millisecond), maxTimer)
	l.timerAt = at
	l.timer = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(delay, ctx.Self(), loopTick{})
}

// queueOwn adds an event for the endpoint stream; next appends it, in
// order with the commands' events, when pump ends.
func (g *grain) queueOwn(ev proto.Message) {
	g.loop.own = append(g.loop.own, ev)
}
