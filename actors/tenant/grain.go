package tenant

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	grainkit "github.com/hookline/hookline/actors/grain"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Kind is the cluster kind of the tenant grain.
const Kind = "tenant"

// NewKind returns the cluster kind "tenant"; each activation learns its
// tenant id from cluster.ClusterInit. It panics if cfg does not validate
// (a programmer error at start-up): call [Config.Validate] first to report it.
func NewKind(cfg Config) *cluster.Kind {
	return cluster.NewKind(Kind, Props(cfg, ""))
}

// Props returns the props of the tenant grain. With an identity, the actor is
// the grain of that tenant in a plain actor system (tests, tools); with "" it
// waits for cluster.ClusterInit to learn it. It panics if cfg does not
// validate.
func Props(cfg Config, identity string) *actor.Props {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	return actor.PropsFromProducer(func() actor.Actor {
		return &grain{cfg: cfg, id: identity, leases: NewLeases(cfg.LeaseDuration, 3*cfg.LeaseDuration)}
	})
}

// request is a command waiting for its turn, with whom to answer.
type request struct {
	sender *actor.PID
	cmd    *controlv1.TenantCommand
}

// grain is the tenant actor. All its fields are owned by the actor: they are
// touched only in Receive and in ReenterAfter continuations, which run on the
// actor too.
type grain struct {
	cfg    Config
	id     string
	stream string
	log    *slog.Logger

	state  *State
	last   events.Revision // revision of the last event seen; valid when exists
	exists bool
	leases *Leases

	loaded   bool
	busy     bool     // an I/O is in flight; commands wait in queue
	stopping bool     // lost ownership or shutting down: answer, never act
	current  *request // the command whose I/O is in flight
	queue    []request
}

// Receive handles one message. It never blocks: reading the stream and
// appending run off the mailbox (see io), and commands are processed one at a
// time, in arrival order.
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
	case *controlv1.TenantCommand:
		if g.stopping {
			g.reply(ctx, ctx.Sender(), errReply(controlv1.GrainError_CODE_UNAVAILABLE, "the tenant grain is stopping; retry"))
			return
		}
		g.queue = append(g.queue, request{sender: ctx.Sender(), cmd: msg})
		g.drain(ctx)
	case *actor.Stopping:
		g.shutdown(ctx, controlv1.GrainError_CODE_UNAVAILABLE, "the tenant grain stopped; retry")
	}
}

// activate reads the stream off the mailbox and rebuilds the state; commands
// wait in the queue until it is done.
func (g *grain) activate(ctx actor.Context) {
	g.stream = events.TenantStream(g.id)
	g.log = g.cfg.Logger.With("tenant_id", g.id, "stream", g.stream)
	log, stream, page := g.cfg.Log, g.stream, g.cfg.ReadPage
	g.io(ctx, func(c context.Context) (any, error) {
		return load(c, log, stream, page)
	}, func(res any, err error) {
		if err != nil {
			g.log.Error("tenant grain cannot load its stream; stopping", "err", err)
			g.stop(ctx, controlv1.GrainError_CODE_UNAVAILABLE, "the tenant grain cannot read its stream; retry")
			return
		}
		l := res.(loaded)
		g.state, g.last, g.exists, g.loaded = l.state, l.last, l.exists, true
		g.log.Debug("tenant grain activated", "revision", uint64(l.last), "exists", l.exists)
	})
}

type loaded struct {
	state  *State
	last   events.Revision
	exists bool
}

// load reads a tenant stream forwards, in pages, and folds it into a State.
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

// drain processes queued commands until one starts I/O.
func (g *grain) drain(ctx actor.Context) {
	for g.loaded && !g.busy && !g.stopping && len(g.queue) > 0 {
		r := g.queue[0]
		g.queue = g.queue[1:]
		g.handle(ctx, &r)
	}
}

func (g *grain) handle(ctx actor.Context, r *request) {
	now := g.cfg.Now()
	dec, err := g.state.Decide(g.id, r.cmd, now, g.cfg.Rand)
	if err != nil {
		g.reply(ctx, r.sender, &controlv1.TenantReply{Error: asGrainError(err)})
		return
	}
	if lr := r.cmd.GetLease(); lr != nil {
		rate, inFlight := g.cfg.DefaultAttemptsPerSecond, g.cfg.DefaultMaxInFlight
		if q := g.state.Quota; q.GetAttemptsPerSecond() > 0 {
			rate = q.GetAttemptsPerSecond()
		}
		if q := g.state.Quota; q.GetMaxInFlight() > 0 {
			inFlight = q.GetMaxInFlight()
		}
		gr := g.leases.Grant(now, lr.GetEndpointId(), lr.GetWantAttempts(), lr.GetWantInFlight(), rate, inFlight)
		g.reply(ctx, r.sender, &controlv1.TenantReply{Lease: &controlv1.QuotaLease{
			Attempts: gr.Attempts, InFlight: gr.InFlight, ExpiresAt: timestamppb.New(gr.Expires),
		}})
		return
	}
	if len(dec.Events) == 0 {
		g.reply(ctx, r.sender, &controlv1.TenantReply{Tenant: g.state.View()})
		return
	}
	g.append(ctx, r, dec.Events, func() {
		g.reply(ctx, r.sender, &controlv1.TenantReply{Tenant: g.state.View(), Key: dec.Key})
	})
}

// append writes msgs with the expected revision the grain holds, then applies
// them and calls done. A wrong revision stops the grain (fencing).
func (g *grain) append(ctx actor.Context, r *request, msgs []proto.Message, done func()) {
	kind := "unknown"
	if od := r.cmd.ProtoReflect().Descriptor().Oneofs().ByName("command"); od != nil {
		if fd := r.cmd.ProtoReflect().WhichOneof(od); fd != nil {
			kind = string(fd.Name())
		}
	}
	evs, err := grainkit.Encode(g.stream, "tenant", kind, g.last, g.exists, msgs)
	if err != nil {
		g.log.Error("tenant grain cannot encode an event", "err", err)
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
			f := grainkit.AppendFailure("tenant", err)
			switch {
			case f.Lost:
				g.log.Warn("tenant grain lost ownership of its stream; stopping", "revision", uint64(g.last), "err", err)
			case f.Stop:
				g.log.Error("tenant grain append failed; stopping", "err", err)
			default:
				g.log.Error("tenant grain append refused", "err", err)
			}
			g.reply(ctx, r.sender, errReply(f.Code, f.Message))
			if f.Stop {
				msg := f.Message
				if !f.Lost {
					msg = "the tenant grain stopped; retry"
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
}

func (g *grain) reply(ctx actor.Context, to *actor.PID, rep *controlv1.TenantReply) {
	if to != nil {
		ctx.Send(to, rep)
	}
}

func errReply(code controlv1.GrainError_Code, msg string) *controlv1.TenantReply {
	return &controlv1.TenantReply{Error: &controlv1.GrainError{Code: code, Message: msg}}
}

func asGrainError(err error) *controlv1.GrainError {
	var e *Error
	if errors.As(err, &e) {
		return e.Proto()
	}
	return &controlv1.GrainError{Code: controlv1.GrainError_CODE_INTERNAL, Message: "internal error"}
}
