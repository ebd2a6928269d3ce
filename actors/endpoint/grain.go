package endpoint

import (
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	hcluster "github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// Kind is the cluster kind of the endpoint grain.
const Kind = "endpoint"

// NewKind returns the cluster kind "endpoint"; each activation learns its
// endpoint id from cluster.ClusterInit. It panics if cfg does not validate
// (a programmer error at start-up): call [Config.Validate] first to report it.
func NewKind(cfg Config) *cluster.Kind {
	return cluster.NewKind(Kind, Props(cfg, ""))
}

// Props returns the props of the endpoint grain. With an identity, the actor
// is the grain of that endpoint in a plain actor system (tests, tools); with
// "" it waits for cluster.ClusterInit to learn it. It panics if cfg does not
// validate.
func Props(cfg Config, identity string) *actor.Props {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	cfg.events = newEventCache(eventCacheBytes, eventCacheEntries) // shared by the grains of these props
	return actor.PropsFromProducer(func() actor.Actor { return &grain{cfg: cfg, id: identity} })
}

type request = command.Request[*internalv1.EndpointCommand]

// retireTick is the timer's message: a rotation overlap may have ended.
type retireTick struct{}

// grain is the endpoint actor. All its fields are owned by the actor: they
// are touched only in Receive and in the continuations of its I/O, which
// run on the actor too.
type grain struct {
	cfg   Config
	id    string
	log   *slog.Logger
	core  *command.Core[*internalv1.EndpointCommand]
	state *State
	timer scheduler.CancelFunc // the pending retireTick, if any

	// loop is the delivery loop (loop.go); nil while it is off or the
	// stream is not loaded yet.
	loop *loop
}

// Receive handles one message. It never blocks: reading the stream, checking
// a URL and appending run off the mailbox (see command.Core), and commands
// are processed one at a time, in arrival order.
func (g *grain) Receive(ctx actor.Context) {
	g.core.Seen(ctx.Message())
	switch msg := ctx.Message().(type) {
	case *actor.Started, *cluster.ClusterInit:
		if command.Identify(msg, &g.id) {
			g.activate(ctx)
		}
	case hcluster.Retire:
		g.retire(ctx)
	case *internalv1.EndpointCommand:
		switch {
		case g.retiring():
			// The placement routes nothing here any more; a caller that
			// held this PID asks again and reaches the new owner.
			reply(ctx, ctx.Sender(), errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, msgMoved))
		case g.core == nil:
			// A plain actor without an identity.
			reply(ctx, ctx.Sender(), errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain has no identity; retry"))
		case msg.GetWake() != nil && !g.core.Stopping():
			// A hint, answered at once: it never waits behind a command's
			// I/O, so the node's wakes flow whatever its grains are doing.
			reply(ctx, ctx.Sender(), &internalv1.EndpointReply{})
			if g.loop != nil {
				g.loop.wake(ctx)
			}
		case g.core.Push(ctx, ctx.Sender(), msg):
			g.next(ctx)
		}
	case retireTick:
		g.timer = nil
		g.next(ctx)
	case command.IdleTick:
		// No message for IdleAfter: if the grain holds nothing, it leaves
		// memory. The next wake or command activates it again, rebuilt
		// from its stream; its due deliveries wait in the due index, whose
		// timers and sweeper wake it when they are due.
		g.core.Tick(ctx, func() bool { return g.idle(ctx) })
	case *actor.Stopping:
		if g.timer != nil {
			g.timer()
			g.timer = nil
		}
		if g.core != nil {
			g.core.Stopped(ctx)
		}
		if g.loop != nil {
			g.loop.stop()
		}
	default:
		// The delivery loop's messages: outcomes, reads, grants, leases and
		// its own ticks, each handled without blocking.
		if g.loop != nil && !g.core.Stopping() {
			g.loop.receive(ctx, msg)
		}
	}
}

// retire stops the grain, whose partition another member owns now, once
// the attempts it has running have their outcomes recorded
// (loop_handover.go); meanwhile it answers no command, and those queued
// are refused.
func (g *grain) retire(ctx actor.Context) {
	switch {
	case g.core == nil:
		ctx.Stop(ctx.Self())
	case g.loop == nil || g.core.Stopping():
		g.core.Stop(ctx, internalv1.GrainError_CODE_UNAVAILABLE, msgMoved)
	case !g.loop.handover.retire(ctx):
		g.core.Refuse(ctx, &internalv1.GrainError{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: msgMoved})
		g.log.Debug("endpoint grain retiring: its partition moved to another member; it stops once its running attempts are recorded", "attempts", g.loop.busy)
	}
}

// retiring reports whether the grain is retiring.
func (g *grain) retiring() bool { return g.loop != nil && g.loop.handover.retiring }

// activate reads the stream off the mailbox and rebuilds the state; commands
// wait in the queue until it is done.
func (g *grain) activate(ctx actor.Context) {
	stream := events.EndpointStream(g.id)
	g.log = g.cfg.Logger.With("endpoint_id", g.id, "stream", stream)
	g.state = &State{}
	g.core = command.NewCore[*internalv1.EndpointCommand](command.Config{
		Kind: Kind, Stream: stream, Log: g.cfg.Log, IOTimeout: g.cfg.IOTimeout, Logger: g.log,
		ErrReply: errReply, Next: g.next, Lost: func() { g.cfg.Quarantine.Lost(g.id, g.cfg.Now()) },
		Stopping: func(ctx actor.Context, e *internalv1.GrainError) {
			if g.loop != nil {
				g.loop.replays.abandonAll(ctx, e)
			}
		},
	})
	g.core.Load(ctx, g.cfg.ReadPage, g.state.Apply, func() { g.startLoop(ctx) })
	g.core.WatchIdle(ctx, g.cfg.IdleAfter)
}

// startLoop starts the delivery loop once the stream is loaded, unless it
// is off (Config.Due unset).
func (g *grain) startLoop(ctx actor.Context) {
	if g.cfg.Due == nil {
		return
	}
	g.loop = newLoop(g)
	g.loop.catchUp(ctx)
	g.loop.lease.prefetch(ctx)
}

// idle reports whether the delivery loop holds nothing that passivating
// would lose: no delivery, no recovery under way, no ordering count that
// nothing would wake it to checkpoint (the Core checks its commands and
// I/O).
func (g *grain) idle(ctx actor.Context) bool {
	return g.loop == nil || g.loop.idle() && !g.loop.ckpt.beforeRest(ctx)
}

// next does the grain's work in order until some of it starts I/O: first
// it retires secrets whose overlap has ended (so that every command sees
// them gone), then it records the delivery loop's own events (circuit
// transitions, a pause on 410, a recovery's progress), then it handles the
// queued commands one by one.
func (g *grain) next(ctx actor.Context) {
	for g.core.Ready() && !g.retiring() {
		if due := g.state.RetireExpired(g.cfg.Now()); len(due) > 0 {
			g.core.Append(ctx, nil, "retire_overlap", due, g.state.Apply, func() {})
			return // the append's continuation comes back here
		}
		if g.loop != nil && len(g.loop.own) > 0 {
			own := g.loop.own
			g.loop.own = nil
			g.core.Append(ctx, nil, "delivery", own, g.state.Apply, func() { g.loop.ownRecorded(ctx) })
			return
		}
		g.schedule(ctx)
		r, ok := g.core.Pop()
		if !ok {
			return
		}
		g.handle(ctx, &r)
	}
}

// schedule arms the timer for the next end of a rotation overlap.
func (g *grain) schedule(ctx actor.Context) {
	if g.timer != nil {
		g.timer()
		g.timer = nil
	}
	next, ok := g.state.NextExpiry()
	if !ok || !g.state.Live() {
		return
	}
	delay := min(max(next.Sub(g.cfg.Now()), time.Millisecond), maxTimer)
	g.timer = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(delay, ctx.Self(), retireTick{})
}

// reply answers to, if there is someone to answer.
func reply(ctx actor.Context, to *actor.PID, rep *internalv1.EndpointReply) {
	if to != nil {
		ctx.Send(to, rep)
	}
}

// refuse answers to with the refusal e.
func refuse(ctx actor.Context, to *actor.PID, e *command.Error) {
	reply(ctx, to, &internalv1.EndpointReply{Error: e.Proto()})
}

func errReply(e *internalv1.GrainError) proto.Message {
	return &internalv1.EndpointReply{Error: e}
}

func errReplyOf(code internalv1.GrainError_Code, msg string) *internalv1.EndpointReply {
	return &internalv1.EndpointReply{Error: &internalv1.GrainError{Code: code, Message: msg}}
}
