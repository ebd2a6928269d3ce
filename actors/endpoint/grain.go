package endpoint

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

	grainkit "github.com/hookline/hookline/actors/grain"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
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
	cfg.events = newEventCache(eventCacheBytes) // shared by the grains of these props
	return actor.PropsFromProducer(func() actor.Actor { return &grain{cfg: cfg, id: identity} })
}

// request is a command waiting for its turn, with whom to answer. A request
// without a command is the grain's own work (retiring secrets).
type request struct {
	sender *actor.PID
	cmd    *controlv1.EndpointCommand
}

// retireTick is the timer's message: a rotation overlap may have ended.
type retireTick struct{}

// grain is the endpoint actor. All its fields are owned by the actor: they
// are touched only in Receive and in ReenterAfter continuations, which run
// on the actor too.
type grain struct {
	cfg    Config
	id     string
	stream string
	log    *slog.Logger

	state  *State
	last   events.Revision // revision of the last event seen; valid when exists
	exists bool

	loaded   bool
	busy     bool     // an I/O is in flight; commands wait in queue
	stopping bool     // lost ownership or shutting down: answer, never act
	current  *request // the command whose I/O is in flight
	queue    []request
	timer    scheduler.CancelFunc // the pending retireTick, if any

	// eng is the delivery loop (loop.go); nil while the engine is off or
	// the stream is not loaded yet.
	eng          *engine
	retryCatchUp bool // waiting for the projections failed; try again
}

// Receive handles one message. It never blocks: reading the stream, checking
// a URL and appending run off the mailbox (see io), and commands are
// processed one at a time, in arrival order.
func (g *grain) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		if g.id != "" {
			g.activate(ctx)
		}
	case *cluster.ClusterInit:
		if g.id == "" && msg.Identity != nil {
			g.id = msg.Identity.Identity
			g.activate(ctx)
		}
	case *controlv1.EndpointCommand:
		if g.stopping {
			g.reply(ctx, ctx.Sender(), errReply(controlv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain is stopping; retry"))
			return
		}
		g.queue = append(g.queue, request{sender: ctx.Sender(), cmd: msg})
		g.drain(ctx)
	case retireTick:
		g.timer = nil
		g.drain(ctx)
	case *actor.Stopping:
		if g.timer != nil {
			g.timer()
			g.timer = nil
		}
		g.shutdown(ctx, controlv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain stopped; retry")
		g.stopEngine()
	default:
		// The delivery loop's messages: outcomes, reads, grants, leases and
		// its own ticks, each handled without blocking.
		if !g.stopping {
			g.receiveLoop(ctx, msg)
		}
	}
}

// activate reads the stream off the mailbox and rebuilds the state; commands
// wait in the queue until it is done.
func (g *grain) activate(ctx actor.Context) {
	g.stream = events.EndpointStream(g.id)
	g.log = g.cfg.Logger.With("endpoint_id", g.id, "stream", g.stream)
	log, stream, page := g.cfg.Log, g.stream, g.cfg.ReadPage
	g.io(ctx, func(c context.Context) (any, error) {
		return load(c, log, stream, page)
	}, func(res any, err error) {
		if err != nil {
			g.log.Error("endpoint grain cannot load its stream; stopping", "err", err)
			g.stop(ctx, controlv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain cannot read its stream; retry")
			return
		}
		l := res.(loaded)
		g.state, g.last, g.exists, g.loaded = l.state, l.last, l.exists, true
		g.log.Debug("endpoint grain activated", "revision", uint64(l.last), "exists", l.exists)
		g.startEngine(ctx)
	})
}

type loaded struct {
	state  *State
	last   events.Revision
	exists bool
}

// load reads an endpoint stream forwards, in pages, and folds it into a
// State.
func load(ctx context.Context, log events.Log, stream string, page int) (loaded, error) {
	l := loaded{state: &State{}}
	for from := events.Revision(0); ; {
		recs, err := log.ReadStream(ctx, stream, events.Forwards, from, page)
		if errors.Is(err, events.ErrStreamNotFound) {
			return l, nil
		}
		if err != nil {
			return l, fmt.Errorf("read %s: %w", stream, err)
		}
		for i := range recs {
			msg, err := events.Decode(&recs[i])
			if err != nil {
				return l, err
			}
			l.state.Apply(msg)
			l.last, l.exists = recs[i].Revision, true
		}
		if len(recs) < page {
			return l, nil
		}
		from = l.last + 1
	}
}

// drain does the grain's work in order until some of it starts I/O: first
// it retires secrets whose overlap has ended (so that every command sees
// them gone), then it handles the queued commands one by one.
func (g *grain) drain(ctx actor.Context) {
	for g.loaded && !g.busy && !g.stopping {
		if due := g.state.RetireExpired(g.cfg.Now()); len(due) > 0 {
			g.append(ctx, &request{}, "retire_overlap", due, func() {})
			return // the append's continuation drains again
		}
		if g.eng != nil && len(g.eng.own) > 0 {
			// The delivery loop's own events: circuit transitions, pause
			// on 410.
			own := g.eng.own
			g.eng.own = nil
			g.append(ctx, &request{}, "delivery", own, func() {
				if g.state.Status != controlv1.Endpoint_STATUS_ACTIVE {
					g.eng.gone = false // the pause is durable; a resume clears it
				}
				g.pump(ctx)
			})
			return
		}
		g.schedule(ctx)
		if len(g.queue) == 0 {
			return
		}
		r := g.queue[0]
		g.queue = g.queue[1:]
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

func (g *grain) handle(ctx actor.Context, r *request) {
	if r.cmd.GetWake() != nil {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{})
		g.wakeLoop(ctx)
		return
	}
	if g.eng != nil {
		switch r.cmd.GetCommand().(type) {
		case *controlv1.EndpointCommand_Replay:
			g.handleReplay(ctx, r)
			return
		case *controlv1.EndpointCommand_Recover:
			g.handleRecover(ctx, r)
			return
		case *controlv1.EndpointCommand_GetRecovery:
			g.handleGetRecovery(ctx, r)
			return
		}
	}
	raw := g.state.URLToCheck(r.cmd)
	if raw == "" {
		g.decide(ctx, r, URLVerdict{})
		return
	}
	policy := g.cfg.Policy
	g.current = r
	g.io(ctx, func(c context.Context) (any, error) {
		u, err := policy.CheckURL(c, raw)
		v := URLVerdict{Raw: raw, Err: err}
		if err == nil {
			v.Normalised = u.String()
		}
		return v, nil
	}, func(res any, err error) {
		g.current = nil
		if err != nil {
			g.reply(ctx, r.sender, errReply(controlv1.GrainError_CODE_UNAVAILABLE, "checking the url failed; retry"))
			return
		}
		g.decide(ctx, r, res.(URLVerdict))
	})
}

func (g *grain) decide(ctx actor.Context, r *request, v URLVerdict) {
	dec, err := g.state.Decide(g.id, r.cmd, Env{
		Now: g.cfg.Now(), Rand: g.cfg.Rand, Keyring: g.cfg.Keyring, URL: v, DefaultOverlap: g.cfg.DefaultOverlap,
	})
	if err != nil {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Error: asGrainError(err)})
		return
	}
	if len(dec.Events) == 0 {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Endpoint: g.view()})
		return
	}
	g.append(ctx, r, commandKind(r.cmd), dec.Events, func() {
		g.reply(ctx, r.sender, &controlv1.EndpointReply{Endpoint: g.view(), Secret: dec.Secret})
		g.wakeLoop(ctx) // a resume, a new configuration: work may start
	})
}

// view is the state's view with the public key, which needs the keyring.
func (g *grain) view() *controlv1.Endpoint {
	v := g.state.View()
	pk, err := g.state.PublicKey(g.cfg.Keyring)
	if err != nil {
		g.log.Error("endpoint grain cannot open its ed25519 seed", "err", err)
	}
	v.PublicKey = pk
	return v
}

func commandKind(cmd *controlv1.EndpointCommand) string {
	if od := cmd.ProtoReflect().Descriptor().Oneofs().ByName("command"); od != nil {
		if fd := cmd.ProtoReflect().WhichOneof(od); fd != nil {
			return string(fd.Name())
		}
	}
	return "unknown"
}

// append writes msgs with the expected revision the grain holds, then applies
// them and calls done. A wrong revision stops the grain (fencing).
func (g *grain) append(ctx actor.Context, r *request, kind string, msgs []proto.Message, done func()) {
	evs, err := grainkit.Encode(g.stream, "endpoint", kind, g.last, g.exists, msgs)
	if err != nil {
		g.log.Error("endpoint grain cannot encode an event", "err", err)
		g.reply(ctx, r.sender, errReply(controlv1.GrainError_CODE_INTERNAL, "cannot encode the event"))
		return
	}
	log, stream, expected := g.cfg.Log, g.stream, events.ExpectAfter(g.last, g.exists)
	g.current = r
	g.io(ctx, func(c context.Context) (any, error) {
		return log.Append(c, stream, expected, evs...)
	}, func(res any, err error) {
		g.current = nil
		if err != nil {
			f := grainkit.AppendFailure("endpoint", err)
			switch {
			case f.Lost:
				g.log.Warn("endpoint grain lost ownership of its stream; stopping", "revision", uint64(g.last), "err", err)
				g.lostOwnership()
			case f.Stop:
				g.log.Error("endpoint grain append failed; stopping", "err", err)
			default:
				g.log.Error("endpoint grain append refused", "err", err)
			}
			g.reply(ctx, r.sender, errReply(f.Code, f.Message))
			if f.Stop {
				msg := f.Message
				if !f.Lost {
					msg = "the endpoint grain stopped; retry"
				}
				g.stop(ctx, f.Code, msg)
			}
			return
		}
		g.last, g.exists = res.(events.AppendResult).Revision, true
		for _, m := range msgs {
			g.state.Apply(m)
		}
		done()
	})
}

// io runs fn off the mailbox under the I/O deadline and continues with cont
// on the actor; meanwhile commands wait in the queue.
func (g *grain) io(ctx actor.Context, fn func(context.Context) (any, error), cont func(any, error)) {
	g.busy = true
	grainkit.IO(ctx, g.cfg.IOTimeout, fn, func(res any, err error) {
		g.busy = false
		if g.stopping {
			return
		}
		cont(res, err)
		g.drain(ctx)
	})
}

// stop answers every waiting command with code and stops the actor.
func (g *grain) stop(ctx actor.Context, code controlv1.GrainError_Code, msg string) {
	g.shutdown(ctx, code, msg)
	ctx.Stop(ctx.Self())
}

func (g *grain) shutdown(ctx actor.Context, code controlv1.GrainError_Code, msg string) {
	g.stopping = true
	if g.current != nil {
		g.reply(ctx, g.current.sender, errReply(code, msg))
		g.current = nil
	}
	for _, r := range g.queue {
		g.reply(ctx, r.sender, errReply(code, msg))
	}
	g.queue = nil
	g.abandonAll(ctx, code, msg)
}

func (g *grain) reply(ctx actor.Context, to *actor.PID, rep *controlv1.EndpointReply) {
	if to != nil {
		ctx.Send(to, rep)
	}
}

func errReply(code controlv1.GrainError_Code, msg string) *controlv1.EndpointReply {
	return &controlv1.EndpointReply{Error: &controlv1.GrainError{Code: code, Message: msg}}
}

func asGrainError(err error) *controlv1.GrainError {
	var e *Error
	if errors.As(err, &e) {
		return e.Proto()
	}
	return &controlv1.GrainError{Code: controlv1.GrainError_CODE_INTERNAL, Message: "internal error"}
}
