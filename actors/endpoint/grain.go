package endpoint

import (
	"context"
	"encoding/base64"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
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
	if _, tick := ctx.Message().(command.IdleTick); !tick && g.core != nil {
		g.core.Seen()
	}
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
	case *internalv1.EndpointCommand:
		switch {
		case g.core == nil:
			// A plain actor without an identity.
			g.reply(ctx, ctx.Sender(), errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain has no identity; retry"))
		case msg.GetWake() != nil && !g.core.Stopping():
			// A hint, answered at once: it never waits behind a command's
			// I/O, so the node's wakes flow whatever its grains are doing.
			g.reply(ctx, ctx.Sender(), &internalv1.EndpointReply{})
			g.wakeLoop(ctx)
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
		g.core.Tick(ctx, g.idle)
	case *actor.Stopping:
		if g.timer != nil {
			g.timer()
			g.timer = nil
		}
		if g.core != nil {
			g.core.Stopped(ctx)
		}
		g.stopLoop()
	default:
		// The delivery loop's messages: outcomes, reads, grants, leases and
		// its own ticks, each handled without blocking.
		if g.core != nil && !g.core.Stopping() {
			g.receiveLoop(ctx, msg)
		}
	}
}

// activate reads the stream off the mailbox and rebuilds the state; commands
// wait in the queue until it is done.
func (g *grain) activate(ctx actor.Context) {
	stream := events.EndpointStream(g.id)
	g.log = g.cfg.Logger.With("endpoint_id", g.id, "stream", stream)
	g.state = &State{}
	g.core = command.NewCore[*internalv1.EndpointCommand](command.Config{
		Kind: Kind, Stream: stream, Log: g.cfg.Log, IOTimeout: g.cfg.IOTimeout, Logger: g.log,
		ErrReply: errReply, Next: g.next, Lost: g.lostOwnership,
		Stopping: func(ctx actor.Context, e *internalv1.GrainError) { g.abandonAll(ctx, e) },
	})
	g.core.Load(ctx, g.cfg.ReadPage, g.state.Apply, func() { g.startLoop(ctx) })
	g.core.WatchIdle(ctx, g.cfg.IdleAfter)
}

// idle reports whether the delivery loop holds nothing that passivating
// would lose: no delivery, no recovery under way (the Core checks its
// commands and I/O).
func (g *grain) idle() bool {
	return g.loop == nil || g.loop.idle()
}

// next does the grain's work in order until some of it starts I/O: first
// it retires secrets whose overlap has ended (so that every command sees
// them gone), then it records the delivery loop's own events (circuit
// transitions, a pause on 410, a recovery's progress), then it handles the
// queued commands one by one.
func (g *grain) next(ctx actor.Context) {
	for g.core.Ready() {
		if due := g.state.RetireExpired(g.cfg.Now()); len(due) > 0 {
			g.core.Append(ctx, nil, "retire_overlap", due, g.state.Apply, func() {})
			return // the append's continuation comes back here
		}
		if g.loop != nil && len(g.loop.own) > 0 {
			own := g.loop.own
			g.loop.own = nil
			g.core.Append(ctx, nil, "delivery", own, g.state.Apply, func() {
				if g.state.Status != controlv1.Endpoint_STATUS_ACTIVE {
					g.loop.gone = false // the pause is durable; a resume clears it
				}
				g.pump(ctx)
			})
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

func (g *grain) handle(ctx actor.Context, r *request) {
	if g.core.Recall(ctx, r, r.Cmd.GetRequestId(), func(msgs []proto.Message) { g.retried(ctx, r, msgs) }) {
		return
	}
	if g.loop != nil {
		switch r.Cmd.GetCommand().(type) {
		case *internalv1.EndpointCommand_Replay:
			g.handleReplay(ctx, r)
			return
		case *internalv1.EndpointCommand_Recover:
			g.handleRecover(ctx, r)
			return
		case *internalv1.EndpointCommand_GetRecovery:
			g.handleGetRecovery(ctx, r)
			return
		case *internalv1.EndpointCommand_ListRecoveries:
			g.handleListRecoveries(ctx, r)
			return
		}
	}
	raw := g.state.URLToCheck(r.Cmd)
	if raw == "" {
		g.decide(ctx, r, URLVerdict{})
		return
	}
	policy := g.cfg.Policy
	g.core.IO(ctx, r, func(c context.Context) (any, error) {
		u, err := policy.CheckURL(c, raw)
		v := URLVerdict{Raw: raw, Err: err}
		if err == nil {
			v.Normalised = u.String()
		}
		return v, nil
	}, func(res any, err error) {
		if err != nil {
			g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "checking the url failed; retry"))
			return
		}
		g.decide(ctx, r, res.(URLVerdict))
	})
}

func (g *grain) decide(ctx actor.Context, r *request, v URLVerdict) {
	dec, err := g.state.Decide(g.id, r.Cmd, Env{
		Now: g.cfg.Now(), Rand: g.cfg.Rand, Keyring: g.cfg.Keyring, URL: v, DefaultOverlap: g.cfg.DefaultOverlap,
	})
	if err != nil {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Error: command.AsGrainError(err)})
		return
	}
	if len(dec.Events) == 0 {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Endpoint: g.view()})
		return
	}
	g.core.Append(ctx, r, commandKind(r.Cmd), dec.Events, g.state.Apply, func() {
		g.reply(ctx, r.Sender, &internalv1.EndpointReply{Endpoint: g.view(), Secret: dec.Secret})
		g.wakeLoop(ctx) // a resume, a new configuration, a deletion: work may start or end
	})
}

// retried answers a command whose request id this grain carried out
// before: the first answer was lost and the caller retried. It is answered
// from what the first run wrote, without running it again: the endpoint as
// it stands, with the secret that a create or a rotation made (opened
// again from its sealed copy), or the recovery it started.
func (g *grain) retried(ctx actor.Context, r *request, msgs []proto.Message) {
	rep := &internalv1.EndpointReply{}
	if g.state.Created {
		rep.Endpoint = g.view()
	}
	for _, m := range msgs {
		var sealed *hooklinev1.SealedSecret
		switch e := m.(type) {
		case *hooklinev1.EndpointCreated:
			sealed = e.GetSecret()
		case *hooklinev1.SecretRotated:
			sealed = e.GetSecret()
		case *hooklinev1.RecoveryStarted:
			if rec, ok := g.state.Recovery(e.GetRecoveryId()); ok {
				rep.Recovery = g.recoveryView(rec)
			}
		}
		if sealed == nil {
			continue
		}
		secret, err := openSecret(g.cfg.Keyring, g.id, sealed)
		if err != nil {
			g.log.Error("endpoint grain cannot open a secret to answer a retried command", "error", err)
			g.reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_INTERNAL, "cannot open the secret of the original request"))
			return
		}
		rep.Secret = secret
	}
	g.log.Info("command retried; answered from the original request", "request_id", r.Cmd.GetRequestId())
	g.reply(ctx, r.Sender, rep)
}

// openSecret returns a sealed signing secret in its "whsec_" form. The
// result is secret: never log it.
func openSecret(kr *seal.Keyring, endpointID string, s *hooklinev1.SealedSecret) (string, error) {
	key, err := kr.Open(s.GetMasterKeyId(), s.GetNonce(), s.GetCiphertext(), seal.SecretAAD(endpointID, s.GetVersion()))
	if err != nil {
		return "", err
	}
	return attempt.SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// view is the state's view with the public key, which needs the keyring.
func (g *grain) view() *controlv1.Endpoint {
	v := g.state.View()
	pk, err := g.state.PublicKey(g.cfg.Keyring)
	if err != nil {
		g.log.Error("endpoint grain cannot open its ed25519 seed", "error", err)
	}
	v.PublicKey = pk
	return v
}

func commandKind(cmd *internalv1.EndpointCommand) string {
	if od := cmd.ProtoReflect().Descriptor().Oneofs().ByName("command"); od != nil {
		if fd := cmd.ProtoReflect().WhichOneof(od); fd != nil {
			return string(fd.Name())
		}
	}
	return "unknown"
}

// stop answers every waiting command with code and msg and stops the actor
// once the messages already in its mailbox are answered too.
func (g *grain) stop(ctx actor.Context, code internalv1.GrainError_Code, msg string) {
	g.core.Stop(ctx, code, msg)
}

func (g *grain) reply(ctx actor.Context, to *actor.PID, rep *internalv1.EndpointReply) {
	if to != nil {
		ctx.Send(to, rep)
	}
}

func errReply(e *internalv1.GrainError) proto.Message {
	return &internalv1.EndpointReply{Error: e}
}

func errReplyOf(code internalv1.GrainError_Code, msg string) *internalv1.EndpointReply {
	return &internalv1.EndpointReply{Error: &internalv1.GrainError{Code: code, Message: msg}}
}
