package command

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

// Request is a command waiting for its turn, with whom to answer. A
// Request without a sender is the grain's own work (retiring secrets,
// recording a circuit transition): nobody is answered.
type Request[C proto.Message] struct {
	Sender *actor.PID
	Cmd    C
}

// Config is what a [Core] needs from its grain. Every field but Done is
// required.
type Config struct {
	// Kind is the grain kind ("tenant", "endpoint"): it names the grain in
	// messages and is part of its event ids.
	Kind string
	// Stream is the grain's own stream.
	Stream string
	// Log holds the stream.
	Log events.Log
	// IOTimeout bounds one I/O (a read of the stream, a URL check, an
	// append).
	IOTimeout time.Duration
	// Logger receives the grain's messages.
	Logger *slog.Logger
	// ErrReply makes the grain's answer carrying an error
	// (EndpointReply{Error: e}, TenantReply{Error: e}).
	ErrReply func(e *internalv1.GrainError) proto.Message
	// Next does the grain's work in order (its queued commands first among
	// it) until some of it starts I/O; the Core calls it after each I/O.
	Next func(ctx actor.Context)
	// Stopping, if set, is called once when the grain stops (not when it
	// passivates: a passivating grain holds nothing), after the Core
	// answered its commands, so the grain answers what else it holds.
	Stopping func(ctx actor.Context, e *internalv1.GrainError)
	// Lost, if set, is called when an append finds that another activation
	// owns the stream (before the grain stops).
	Lost func()
}

// Core is the shared part of an event-sourced grain (see the package
// documentation): its stream's fencing state, its command queue, its I/O
// off the mailbox and its stop path. It is owned by the actor: every
// method must be called in Receive or in a continuation of [Core.IO]. The
// zero value is not usable: build it with [NewCore].
type Core[C proto.Message] struct {
	cfg Config

	last   events.Revision // revision of the last event seen; valid when exists
	exists bool
	done   Done

	loaded  bool
	busy    bool        // an I/O is in flight; commands wait in queue
	current *Request[C] // the command whose I/O is in flight
	queue   []Request[C]
	stopped *internalv1.GrainError // set once stopping: every command gets it

	// The idle timer (WatchIdle): seen counts the messages received,
	// seenAtTick their count at the previous tick.
	idleAfter        time.Duration
	idleTimer        scheduler.CancelFunc
	seen, seenAtTick uint64
}

// NewCore returns the core of a grain.
func NewCore[C proto.Message](cfg Config) *Core[C] {
	return &Core[C]{cfg: cfg}
}

// Load reads the stream off the mailbox, in pages of page events, calls
// apply with each event in order, and then done on the actor. A stream that
// cannot be read stops the grain (UNAVAILABLE): the next activation tries
// again. Commands wait in the queue until the stream is loaded.
func (c *Core[C]) Load(ctx actor.Context, page int, apply func(proto.Message), done func()) {
	log, stream := c.cfg.Log, c.cfg.Stream
	c.IO(ctx, nil, func(rc context.Context) (any, error) {
		return load(rc, log, stream, page)
	}, func(res any, err error) {
		if err != nil {
			c.cfg.Logger.Error(c.cfg.Kind+" grain cannot load its stream; stopping", "error", err)
			c.Stop(ctx, internalv1.GrainError_CODE_UNAVAILABLE, "the "+c.cfg.Kind+" grain cannot read its stream; retry")
			return
		}
		l := res.(loaded)
		for i, m := range l.msgs {
			apply(m)
			c.done.Observe(m, l.revs[i])
		}
		c.last, c.exists, c.loaded = l.last, l.exists, true
		c.cfg.Logger.Debug(c.cfg.Kind+" grain activated", "revision", uint64(l.last), "exists", l.exists)
		done()
	})
}

type loaded struct {
	msgs   []proto.Message
	revs   []events.Revision
	last   events.Revision
	exists bool
}

// load reads a stream forwards, in pages, and decodes it.
func load(ctx context.Context, log events.Log, stream string, page int) (loaded, error) {
	var l loaded
	err := ReadStream(ctx, log, stream, page, func(m proto.Message, rev events.Revision) {
		l.msgs = append(l.msgs, m)
		l.revs = append(l.revs, rev)
		l.last, l.exists = rev, true
	})
	return l, err
}

// Loaded reports whether the stream is loaded.
func (c *Core[C]) Loaded() bool { return c.loaded }

// Stopping reports whether the grain is stopping or passivating.
func (c *Core[C]) Stopping() bool { return c.stopped != nil }

// Ready reports whether the grain may start its next piece of work: loaded,
// no I/O in flight, not stopping.
func (c *Core[C]) Ready() bool { return c.loaded && !c.busy && c.stopped == nil }

// Idle reports whether the grain holds no command and runs no I/O.
func (c *Core[C]) Idle() bool { return !c.busy && c.current == nil && len(c.queue) == 0 }

// Revision returns the revision of the stream's last event and whether the
// stream exists.
func (c *Core[C]) Revision() (events.Revision, bool) { return c.last, c.exists }

// Done returns the request ids of the commands recently carried out.
func (c *Core[C]) Done() *Done { return &c.done }

// Push queues a command from sender. A stopping grain answers it at once
// with the stop's error (so that the caller retries elsewhere) and Push
// reports false.
func (c *Core[C]) Push(ctx actor.Context, sender *actor.PID, cmd C) bool {
	if c.stopped != nil {
		c.Reply(ctx, sender, c.cfg.ErrReply(c.stopped))
		return false
	}
	c.queue = append(c.queue, Request[C]{Sender: sender, Cmd: cmd})
	return true
}

// Pop takes the next queued command if the grain is [Core.Ready].
func (c *Core[C]) Pop() (Request[C], bool) {
	if !c.Ready() || len(c.queue) == 0 {
		return Request[C]{}, false
	}
	r := c.queue[0]
	c.queue[0] = Request[C]{}
	c.queue = c.queue[1:]
	return r, true
}

// IO runs fn off the mailbox under the I/O deadline on behalf of r (nil:
// the grain's own work), then cont with its result on the actor, then the
// grain's Next. Meanwhile commands wait in the queue; if the grain stops
// before fn returns, r is answered by the stop and cont does not run.
func (c *Core[C]) IO(ctx actor.Context, r *Request[C], fn func(context.Context) (any, error), cont func(any, error)) {
	c.busy, c.current = true, r
	IO(ctx, c.cfg.IOTimeout, fn, func(res any, err error) {
		c.busy, c.current = false, nil
		if c.stopped != nil {
			return
		}
		cont(res, err)
		if c.cfg.Next != nil {
			c.cfg.Next(ctx)
		}
	})
}

// Append writes msgs, the events of r's command of kind cmdKind, with the
// expected revision the grain holds, then calls apply with each of them and
// done, on the actor. A failed append answers r with what the failure
// means, and stops the grain when it must (see [AppendFailure]): a wrong
// revision (another activation owns the stream: fencing) or an append that
// may or may not have landed.
func (c *Core[C]) Append(ctx actor.Context, r *Request[C], cmdKind string, msgs []proto.Message, apply func(proto.Message), done func()) {
	evs, err := Encode(c.cfg.Stream, c.cfg.Kind, cmdKind, c.last, c.exists, msgs)
	if err != nil {
		c.cfg.Logger.Error(c.cfg.Kind+" grain cannot encode an event", "error", err)
		c.answer(ctx, r, &internalv1.GrainError{Code: internalv1.GrainError_CODE_INTERNAL, Message: "cannot encode the event"})
		return
	}
	log, stream, expected := c.cfg.Log, c.cfg.Stream, events.ExpectAfter(c.last, c.exists)
	c.IO(ctx, r, func(rc context.Context) (any, error) {
		return log.Append(rc, stream, expected, evs...)
	}, func(res any, err error) {
		if err != nil {
			f := AppendFailure(c.cfg.Kind, err)
			switch {
			case f.Lost:
				c.cfg.Logger.Warn(c.cfg.Kind+" grain lost ownership of its stream; stopping", "revision", uint64(c.last), "error", err)
				if c.cfg.Lost != nil {
					c.cfg.Lost()
				}
			case f.Stop:
				c.cfg.Logger.Error(c.cfg.Kind+" grain append failed; stopping", "error", err)
			default:
				c.cfg.Logger.Error(c.cfg.Kind+" grain append refused", "error", err)
			}
			c.answer(ctx, r, &internalv1.GrainError{Code: f.Code, Message: f.Message})
			if f.Stop {
				msg := f.Message
				if !f.Lost {
					msg = "the " + c.cfg.Kind + " grain stopped; retry"
				}
				c.Stop(ctx, f.Code, msg)
			}
			return
		}
		first := c.last + 1
		if !c.exists {
			first = 0
		}
		c.last, c.exists = res.(events.AppendResult).Revision, true
		for i, m := range msgs {
			apply(m)
			c.done.Observe(m, first+events.Revision(i))
		}
		done()
	})
}

func (c *Core[C]) answer(ctx actor.Context, r *Request[C], e *internalv1.GrainError) {
	if r != nil {
		c.Reply(ctx, r.Sender, c.cfg.ErrReply(e))
	}
}

// Stop answers the command in flight and every queued one with code and
// msg, and stops the actor once it has answered, the same way, every
// message already in its mailbox: the stop is a poison pill queued behind
// them, not a system message that would overtake them and leave their
// callers waiting for a timeout. Later calls do nothing.
func (c *Core[C]) Stop(ctx actor.Context, code internalv1.GrainError_Code, msg string) {
	if c.stopped != nil {
		return
	}
	c.stopped = &internalv1.GrainError{Code: code, Message: msg}
	c.cancelIdle()
	c.answerAll(ctx)
	if c.cfg.Stopping != nil {
		c.cfg.Stopping(ctx, c.stopped)
	}
	ctx.Poison(ctx.Self())
}

// IdleTick is the message of a grain's idle timer (see [Core.WatchIdle]):
// the grain passes it to [Core.Tick].
type IdleTick struct{}

// WatchIdle starts the idle timer: a grain that receives no message for a
// whole period of after (real time; between after and twice after from its
// last message) and holds nothing passivates. The grain passes every
// message to [Core.Seen]. (protoactor's receive timeout is
// not used: its timer goroutine writes the actor's context unguarded, a
// data race with the mailbox, and it disarms itself once fired.)
func (c *Core[C]) WatchIdle(ctx actor.Context, after time.Duration) {
	c.idleAfter = after
	c.armIdle(ctx)
}

func (c *Core[C]) armIdle(ctx actor.Context) {
	c.seenAtTick = c.seen
	c.idleTimer = scheduler.NewTimerScheduler(ctx.ActorSystem().Root).SendOnce(c.idleAfter, ctx.Self(), IdleTick{})
}

// Seen counts msg for the idle timer, unless it is the timer's own
// [IdleTick]. A grain calls it with every message; on a nil Core (a grain
// not activated yet) it does nothing.
func (c *Core[C]) Seen(msg any) {
	if _, tick := msg.(IdleTick); !tick && c != nil {
		c.seen++
	}
}

// Tick handles the idle timer's message: after a period without any
// message, a grain that holds nothing (the Core holds no command and runs
// no I/O, and idle, the grain's own check, agrees) passivates; otherwise
// the timer runs another period.
func (c *Core[C]) Tick(ctx actor.Context, idle func() bool) {
	c.idleTimer = nil
	if c.stopped != nil {
		return
	}
	if c.seen == c.seenAtTick && c.Passivate(ctx, idle) {
		c.cfg.Logger.Debug(c.cfg.Kind + " grain passivating")
		return
	}
	c.armIdle(ctx)
}

// Passivate stops an idle grain the same way as Stop: commands already in
// its mailbox are answered UNAVAILABLE (retry: the next one activates the
// grain again, rebuilt from its stream). It reports false, and does
// nothing, unless the grain is [Core.Idle] and idle (the grain's own
// check; nil: none) reports true.
func (c *Core[C]) Passivate(ctx actor.Context, idle func() bool) bool {
	if c.stopped != nil || !c.Idle() || (idle != nil && !idle()) {
		return false
	}
	c.stopped = &internalv1.GrainError{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: "the " + c.cfg.Kind + " grain is passivating; retry"}
	c.cancelIdle()
	ctx.Poison(ctx.Self())
	return true
}

func (c *Core[C]) cancelIdle() {
	if c.idleTimer != nil {
		c.idleTimer()
		c.idleTimer = nil
	}
}

// Stopped answers what the grain still holds when the actor stops without
// [Core.Stop] (its node shuts down): UNAVAILABLE, retry.
func (c *Core[C]) Stopped(ctx actor.Context) {
	c.cancelIdle()
	if c.stopped != nil {
		c.answerAll(ctx) // nothing, unless commands came after the stop
		return
	}
	c.stopped = &internalv1.GrainError{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: "the " + c.cfg.Kind + " grain stopped; retry"}
	c.answerAll(ctx)
	if c.cfg.Stopping != nil {
		c.cfg.Stopping(ctx, c.stopped)
	}
}

// Refuse answers every queued command with e; the command in flight, if
// any, goes on. A grain that takes no command any more (it is retiring)
// answers those that come later itself.
func (c *Core[C]) Refuse(ctx actor.Context, e *internalv1.GrainError) {
	for _, r := range c.queue {
		c.Reply(ctx, r.Sender, c.cfg.ErrReply(e))
	}
	c.queue = nil
}

func (c *Core[C]) answerAll(ctx actor.Context) {
	if c.current != nil {
		c.Reply(ctx, c.current.Sender, c.cfg.ErrReply(c.stopped))
		c.current = nil
	}
	for _, r := range c.queue {
		c.Reply(ctx, r.Sender, c.cfg.ErrReply(c.stopped))
	}
	c.queue = nil
}

// Reply sends rep to to, if there is someone to answer.
func (c *Core[C]) Reply(ctx actor.Context, to *actor.PID, rep proto.Message) {
	if to != nil {
		ctx.Send(to, rep)
	}
}

type ioResult struct {
	v   any
	err error
}

// IO runs fn in a goroutine under timeout and continues with cont on the
// actor (through ReenterAfter), so a grain never blocks in Receive. cont gets
// fn's result, or an error if the future failed. The goroutine ends when fn
// returns, at the latest at the timeout.
func IO(ctx actor.Context, timeout time.Duration, fn func(context.Context) (any, error), cont func(any, error)) {
	f := actor.NewFuture(ctx.ActorSystem(), timeout+time.Second)
	root, pid := ctx.ActorSystem().Root, f.PID()
	go func() {
		c, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		v, err := fn(c)
		root.Send(pid, &ioResult{v: v, err: err})
	}()
	ctx.ReenterAfter(f, func(res any, err error) {
		if r, ok := res.(*ioResult); ok && err == nil {
			res, err = r.v, r.err
		} else if err == nil {
			err = fmt.Errorf("unexpected i/o result %T", res)
		}
		cont(res, err)
	})
}

// Recall reads, off the mailbox on behalf of r, the events that the
// remembered request requestID wrote (see [Done]) and continues with them
// on the actor: the grain answers a retried command from them. It reports
// false, and does nothing, when requestID is not remembered.
func (c *Core[C]) Recall(ctx actor.Context, r *Request[C], requestID string, cont func([]proto.Message)) bool {
	from, ok := c.done.Find(requestID)
	if !ok {
		return false
	}
	log, stream := c.cfg.Log, c.cfg.Stream
	c.IO(ctx, r, func(rc context.Context) (any, error) {
		recs, err := log.ReadStream(rc, stream, events.Forwards, from, MaxDone)
		if err != nil {
			return nil, fmt.Errorf("read %s from %d: %w", stream, uint64(from), err)
		}
		var msgs []proto.Message
		for i := range recs {
			m, err := events.Decode(&recs[i])
			if err != nil {
				return nil, err
			}
			if id, ok := m.(requestIDer); ok && id.GetRequestId() == requestID {
				msgs = append(msgs, m)
			}
		}
		return msgs, nil
	}, func(res any, err error) {
		if err != nil {
			c.cfg.Logger.Error(c.cfg.Kind+" grain cannot read the events of a retried command", "error", err)
			c.answer(ctx, r, &internalv1.GrainError{Code: internalv1.GrainError_CODE_UNAVAILABLE, Message: "cannot read the answer of the original request; retry"})
			return
		}
		cont(res.([]proto.Message))
	})
	return true
}
