package tenant

import (
	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
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

type request = command.Request[*internalv1.TenantCommand]

// grain is the tenant actor. All its fields are owned by the actor: they are
// touched only in Receive and in the continuations of its I/O, which run on
// the actor too.
type grain struct {
	cfg    Config
	id     string
	core   *command.Core[*internalv1.TenantCommand]
	state  *State
	leases *Leases
}

// Receive handles one message. It never blocks: reading the stream and
// appending run off the mailbox (see command.Core), and commands are
// processed one at a time, in arrival order.
func (g *grain) Receive(ctx actor.Context) {
	g.core.Seen(ctx.Message())
	switch msg := ctx.Message().(type) {
	case *actor.Started, *cluster.ClusterInit:
		if command.Identify(msg, &g.id) {
			g.activate(ctx)
		}
	case *internalv1.TenantCommand:
		if g.core == nil {
			// Not activated: a plain actor without an identity.
			ctx.Send(ctx.Sender(), errReply(&internalv1.GrainError{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: "the tenant grain has no identity; retry"}))
			return
		}
		if g.core.Push(ctx, ctx.Sender(), msg) {
			g.next(ctx)
		}
	case command.IdleTick:
		// Quiet for IdleAfter: leave memory; the next command activates
		// the grain again, rebuilt from its stream. Leases are memory only
		// and are asked for again within a second.
		g.core.Tick(ctx, nil)
	case *actor.Stopping:
		if g.core != nil {
			g.core.Stopped(ctx)
		}
	}
}

// activate reads the stream off the mailbox and rebuilds the state; commands
// wait in the queue until it is done.
func (g *grain) activate(ctx actor.Context) {
	stream := events.TenantStream(g.id)
	g.state = &State{}
	g.core = command.NewCore[*internalv1.TenantCommand](command.Config{
		Kind: Kind, Stream: stream, Log: g.cfg.Log, IOTimeout: g.cfg.IOTimeout,
		Logger:   g.cfg.Logger.With("tenant_id", g.id, "stream", stream),
		ErrReply: errReply, Next: g.next,
	})
	g.core.Load(ctx, g.cfg.ReadPage, g.state.Apply, func() {})
	g.core.WatchIdle(ctx, g.cfg.IdleAfter)
}

// next processes queued commands until one starts I/O.
func (g *grain) next(ctx actor.Context) {
	for {
		r, ok := g.core.Pop()
		if !ok {
			return
		}
		g.handle(ctx, &r)
	}
}

func (g *grain) handle(ctx actor.Context, r *request) {
	if g.core.Recall(ctx, r, r.Cmd.GetRequestId(), func(msgs []proto.Message) { g.retried(ctx, r, msgs) }) {
		return
	}
	now := g.cfg.Now()
	dec, err := g.state.Decide(g.id, r.Cmd, now, g.cfg.Rand)
	if err != nil {
		g.core.Reply(ctx, r.Sender, &internalv1.TenantReply{Error: command.AsGrainError(err)})
		return
	}
	if lr := r.Cmd.GetLease(); lr != nil {
		rate, inFlight := g.cfg.DefaultAttemptsPerSecond, g.cfg.DefaultMaxInFlight
		if q := g.state.Quota; q.GetAttemptsPerSecond() > 0 {
			rate = q.GetAttemptsPerSecond()
		}
		if q := g.state.Quota; q.GetMaxInFlight() > 0 {
			inFlight = q.GetMaxInFlight()
		}
		gr := g.leases.Grant(now, lr.GetEndpointId(), lr.GetWantAttempts(), lr.GetWantInFlight(), rate, inFlight)
		g.core.Reply(ctx, r.Sender, &internalv1.TenantReply{Lease: &internalv1.QuotaLease{
			Attempts: gr.Attempts, InFlight: gr.InFlight, ExpiresAt: timestamppb.New(gr.Expires),
		}})
		return
	}
	g.write(ctx, r, dec)
}

// write appends a decision's events and answers with the tenant as it
// stands (and the key, once, for an issue).
func (g *grain) write(ctx actor.Context, r *request, dec Decision) {
	if len(dec.Events) == 0 {
		g.core.Reply(ctx, r.Sender, &internalv1.TenantReply{Tenant: g.state.View()})
		return
	}
	g.core.Append(ctx, r, command.Name(r.Cmd), dec.Events, g.state.Apply, func() {
		g.core.Reply(ctx, r.Sender, &internalv1.TenantReply{Tenant: g.state.View(), Key: dec.Key})
	})
}

// retried answers a command whose request id this grain carried out
// before (its answer was lost, and the caller retried): from the events
// the first run wrote, without running it again. An issued key is the
// exception: the log holds only its hash, so it cannot be shown again; it
// is replaced (see [State.Reissue]).
func (g *grain) retried(ctx actor.Context, r *request, msgs []proto.Message) {
	var issued *hooklinev1.ApiKeyIssued
	for _, m := range msgs {
		if k, ok := m.(*hooklinev1.ApiKeyIssued); ok {
			issued = k // the last one: the one still live
		}
	}
	if issued == nil || r.Cmd.GetIssueKey() == nil {
		g.core.Reply(ctx, r.Sender, &internalv1.TenantReply{Tenant: g.state.View()})
		return
	}
	dec, err := g.state.Reissue(g.id, issued, g.cfg.Now(), g.cfg.Rand)
	if err != nil {
		g.core.Reply(ctx, r.Sender, &internalv1.TenantReply{Error: command.AsGrainError(err)})
		return
	}
	g.cfg.Logger.Warn("api key issued for a request whose answer was lost; replacing it", "tenant_id", g.id, "key_id", issued.GetKeyId())
	g.write(ctx, r, dec)
}

func errReply(e *internalv1.GrainError) proto.Message {
	return &internalv1.TenantReply{Error: e}
}
