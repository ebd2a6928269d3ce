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
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The delivery loop.
//
// On activation, once its stream is loaded, the grain reads the log's head
// and waits (off the mailbox) until the node's projections of its delivery
// partition have applied it (the partition live on this node: the cluster
// places the grain on the partition's owner): the due index then reflects
// every outcome a previous activation wrote. From then on, whenever it is woken (a Wake command, its timer for
// the next known due time, the breaker's or the token bucket's next
// opening, and after each outcome) it pulls due deliveries and holds them
// as flights: it reads each one's delivery stream (its revision and
// attempt count, the truth when the index lags) and the published event
// (the payload, cached while held), then attempts it within the limits, in
// this order: endpoint status, in-flight limit, tenant lease, circuit
// breaker, token bucket, and a slot from the node's dispatcher. Attempts
// run off the mailbox and come back as messages; each outcome is appended
// to the delivery stream with the revision the flight holds, and the next
// pull first waits until the projections have applied the grain's own
// appends, so the index never shows it a delivery it has just settled.
//
// Status: a paused or disabled endpoint attempts nothing and does not pull;
// its deliveries stay due (those past their deadline expire on resume). A
// deleted endpoint ends every due delivery at once as failed with a
// terminal AttemptFailed of ERROR_CLASS_ENDPOINT_GONE and no HTTP attempt,
// so that its deliveries do not stay due forever and the counts add up.

// engine is the delivery loop's state. It is owned by the actor, like the
// rest of the grain.
type engine struct {
	// ctx ends when the grain stops; every goroutine the loop starts
	// derives from it.
	ctx    context.Context
	cancel context.CancelFunc
	// incarnation names this activation in the ids of its delivery events.
	incarnation string

	caughtUp bool
	flights  map[string]*flight // held deliveries, by id
	ready    []*flight          // flights waiting for the limits, new first
	running  int                // flights asking for a slot or attempting
	pulling  bool
	wantPull bool
	written  events.Position // the position of the grain's last append

	breaker *Breaker
	limiter *rate.Limiter
	lease   leaseState
	// own are the endpoint-stream events the loop decided (circuit
	// transitions, pause on 410), appended in order by drain.
	own  []proto.Message
	gone bool // a 410 paused the endpoint; its event may not be durable yet

	nextDue time.Time // earliest retry the grain scheduled
	timer   scheduler.CancelFunc
	timerAt time.Time

	recoveries map[string]*recovery
}

// The loop's messages to its own actor.
type (
	caughtUp  struct{ err error }
	loopTick  struct{}
	pulledDue struct {
		items []due.Item
		err   error
	}
)

func (g *grain) engineOn() bool { return g.cfg.Due != nil }

// startEngine begins the delivery loop once the stream is loaded: it waits,
// off the mailbox, for the projections to reach the log's head.
func (g *grain) startEngine(ctx actor.Context) {
	if !g.engineOn() {
		return
	}
	if g.eng == nil {
		c, cancel := context.WithCancel(context.Background())
		g.eng = &engine{ctx: c, cancel: cancel, incarnation: uuid.NewString(), flights: map[string]*flight{}, recoveries: map[string]*recovery{}}
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

// stopEngine ends the loop's goroutines and gives back its slots.
func (g *grain) stopEngine() {
	e := g.eng
	if e == nil {
		return
	}
	e.cancel()
	if e.timer != nil {
		e.timer()
		e.timer = nil
	}
	if g.cfg.Dispatcher != nil && g.state != nil {
		g.cfg.Dispatcher.Leave(g.state.TenantID, g.id)
	}
}

// async runs fn off the mailbox and sends its result to the actor. The
// goroutine ends when fn returns: at the latest at timeout (0: none) or
// when the grain stops.
func (g *grain) async(ctx actor.Context, timeout time.Duration, fn func(context.Context) any) {
	root, self, parent := ctx.ActorSystem().Root, ctx.Self(), g.eng.ctx
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
	if g.eng == nil {
		return false
	}
	switch m := msg.(type) {
	case *caughtUp:
		g.onCaughtUp(ctx, m)
	case loopTick:
		g.eng.timer, g.eng.timerAt = nil, time.Time{}
		if !g.eng.nextDue.After(g.cfg.Now()) {
			g.eng.nextDue = time.Time{}
		}
		g.eng.wantPull = true
		g.pump(ctx)
	case *pulledDue:
		g.onPulled(ctx, m)
	case *readDone:
		g.onRead(ctx, m)
	case *slotGranted:
		g.onSlot(ctx, m)
	case *attemptDone:
		g.onAttempt(ctx, m)
	case *recorded:
		g.onRecorded(ctx, m)
	case *leaseReply:
		g.onLease(ctx, m)
	case *recoverPage:
		g.onRecoverPage(ctx, m)
	default:
		return false
	}
	return true
}

func (g *grain) onCaughtUp(ctx actor.Context, m *caughtUp) {
	if m.err != nil {
		g.log.Error("endpoint grain cannot wait for the projections; retrying", "err", m.err)
		g.arm(ctx, g.cfg.Now().Add(time.Second))
		g.eng.caughtUp = false
		g.retryCatchUp = true
		return
	}
	g.eng.caughtUp = true
	g.eng.wantPull = true
	g.pump(ctx)
}

// wakeLoop asks for a pull: a Wake, a resume, a command that changed the
// endpoint.
func (g *grain) wakeLoop(ctx actor.Context) {
	if g.eng == nil {
		return
	}
	g.eng.wantPull = true
	g.pump(ctx)
}

// attempting reports whether the endpoint may attempt now.
func (g *grain) attempting() bool {
	return g.state.Live() && g.state.Status == controlv1.Endpoint_STATUS_ACTIVE && !g.eng.gone && !g.cfg.Drain.Draining()
}

func (g *grain) maxInFlight() int {
	if n := g.state.Config.GetMaxInFlight(); n > 0 {
		return int(n)
	}
	return g.cfg.MaxInFlight
}

// pump starts what the limits allow, pulls when asked to and there is room,
// and arms the timer for the next moment something may change.
func (g *grain) pump(ctx actor.Context) {
	e := g.eng
	if e == nil || g.stopping || !g.loaded {
		return
	}
	if !e.caughtUp {
		if g.retryCatchUp {
			g.retryCatchUp = false
			g.startEngine(ctx)
		}
		return
	}
	if !g.state.Created {
		return
	}
	now := g.cfg.Now()
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
	paused := g.state.Live() && g.state.Status != controlv1.Endpoint_STATUS_ACTIVE
	if e.wantPull && !e.pulling && !paused && len(e.flights) < g.cfg.PullLimit+g.maxInFlight() {
		g.pull(ctx)
	}
	if !e.nextDue.IsZero() && (wake.IsZero() || e.nextDue.Before(wake)) {
		wake = e.nextDue
	}
	if !wake.IsZero() {
		g.arm(ctx, wake)
	}
	if len(e.own) > 0 {
		g.drain(ctx)
	}
}

// startReady asks for slots for the ready flights, in order, while the
// limits allow; it returns when a limit that opens with time will open
// (zero if none).
func (g *grain) startReady(ctx actor.Context, now time.Time) time.Time {
	e := g.eng
	if e.breaker == nil {
		e.breaker = NewBreaker(g.cfg.Breaker, g.state)
	}
	g.tuneLimiter(now)
	for len(e.ready) > 0 {
		if e.running >= g.maxInFlight() {
			return time.Time{} // an outcome pumps again
		}
		if ok, retry := g.leaseAllows(ctx, now); !ok {
			return retry
		}
		ok, ev := e.breaker.Allow(now)
		if ev != nil {
			g.queueOwn(ev)
		}
		if !ok {
			return e.breaker.Until()
		}
		probe := e.breaker.Probing()
		r := e.limiter.ReserveN(now, 1)
		if d := r.DelayFrom(now); !r.OK() || d > 0 {
			r.CancelAt(now)
			if probe {
				e.breaker.Cancel()
			}
			return now.Add(max(d, 10*time.Millisecond))
		}
		f := e.ready[0]
		e.ready = e.ready[1:]
		f.stage, f.probe = stageAsking, probe
		e.running++
		g.useLease()
		g.acquire(ctx, f)
		if probe {
			return time.Time{} // one probe; its outcome pumps again
		}
	}
	return time.Time{}
}

// tuneLimiter builds the token bucket, or follows a change of the
// endpoint's rate or burst.
func (g *grain) tuneLimiter(now time.Time) {
	r, b := g.state.Config.GetRatePerSecond(), int(g.state.Config.GetBurst())
	if r <= 0 {
		r = g.cfg.RatePerSecond
	}
	if b <= 0 {
		b = g.cfg.Burst
	}
	if g.eng.limiter == nil {
		g.eng.limiter = rate.NewLimiter(rate.Limit(r), b)
		return
	}
	if g.eng.limiter.Limit() != rate.Limit(r) {
		g.eng.limiter.SetLimitAt(now, rate.Limit(r))
	}
	if g.eng.limiter.Burst() != b {
		g.eng.limiter.SetBurstAt(now, b)
	}
}

// pull asks the due index for the endpoint's due deliveries, off the
// mailbox, after the projections have applied the grain's own appends.
func (g *grain) pull(ctx actor.Context) {
	e := g.eng
	e.pulling, e.wantPull = true, false
	idx, proj, now, part := g.cfg.Due, g.cfg.Projections, g.cfg.Now, g.partition()
	id, written, limit := g.id, e.written, g.cfg.PullLimit+len(e.flights)
	g.async(ctx, g.cfg.IOTimeout, func(c context.Context) any {
		if err := proj.WaitForPartition(c, part, written); err != nil {
			return &pulledDue{err: err}
		}
		items, err := idx.Pull(id, now(), limit)
		return &pulledDue{items: items, err: err}
	})
}

func (g *grain) onPulled(ctx actor.Context, m *pulledDue) {
	e := g.eng
	e.pulling = false
	if m.err != nil {
		switch {
		case errors.Is(m.err, due.ErrNotLive):
			// The partition moved away: the placement stops this grain
			// and the new owner's activation takes over.
			g.log.Info("endpoint grain's partition is not served here; waiting", "err", m.err)
		case !errors.Is(m.err, context.Canceled):
			g.log.Warn("endpoint grain cannot pull due deliveries; retrying", "err", m.err)
		}
		g.arm(ctx, g.cfg.Now().Add(time.Second))
		return
	}
	room := g.cfg.PullLimit + g.maxInFlight() - len(e.flights)
	for _, it := range m.items {
		if _, held := e.flights[it.DeliveryID]; held || it.EndpointID != g.id {
			continue
		}
		if room <= 0 {
			e.wantPull = true // more after some progress
			break
		}
		room--
		f := &flight{item: it}
		e.flights[it.DeliveryID] = f
		g.read(ctx, f)
	}
	g.pump(ctx)
}

// enqueue puts a flight among the ready ones: new deliveries first, then
// by due time.
func (g *grain) enqueue(f *flight) {
	f.stage = stageReady
	e := g.eng
	e.ready = append(e.ready, f)
	slices.SortStableFunc(e.ready, func(a, b *flight) int {
		if ca, cb := a.class(), b.class(); ca != cb {
			return int(ca) - int(cb)
		}
		return a.item.DueAt.Compare(b.item.DueAt)
	})
}

// arm sets the loop's timer for at, unless it is set for earlier. The
// delay is measured on the injected clock and capped, so that a clock that
// moves differently is noticed within maxTimer.
func (g *grain) arm(ctx actor.Context, at time.Time) {
	e := g.eng
	if e.timer != nil && !e.timerAt.After(at) {
		return
	}
	if e.timer != nil {
		e.timer()
	}
	delay := min(max(at.Sub(g.cfg.Now()), time.Millisecond), maxTimer)
	e.timerAt = at
	e.timer = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(delay, ctx.Self(), loopTick{})
}

// queueOwn adds an event for the endpoint stream; drain appends it, in
// order with the commands' events, when pump ends.
func (g *grain) queueOwn(ev proto.Message) {
	g.eng.own = append(g.eng.own, ev)
}
