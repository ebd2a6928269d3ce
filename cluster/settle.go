package cluster

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// settleActorName names each member's settle actor.
const settleActorName = "hookline-settle"

// settlement makes a command's effects visible on every node before the
// command answers: the registry (tenants, keys, endpoints and their
// subscriptions) is applied by each node from the log, so an endpoint
// created through one node would otherwise be missing for a moment from a
// publish planned on another. WaitFor waits for this node's projections,
// then asks every other member to wait for the same position, at most the
// node's request timeout each; a member that does not answer in time (it is
// down or far behind) is logged and not waited for: the command was
// recorded, and reconciliation re-plans what a lagging node missed. It is
// safe for concurrent use.
type settlement struct {
	node    *Node
	runner  *projections.Runner
	timeout time.Duration
	logger  *slog.Logger
}

// WaitFor implements control.Projections.
func (s *settlement) WaitFor(ctx context.Context, pos events.Position) error {
	if err := s.runner.WaitFor(ctx, pos); err != nil {
		return err
	}
	msg := &controlv1.WaitApplied{Commit: pos.Commit, Prepare: pos.Prepare}
	var wg sync.WaitGroup
	for _, m := range s.node.Members() {
		if m.Address == s.node.Address() {
			continue
		}
		wg.Go(func() {
			res, err := s.node.system.Root.RequestFuture(actor.NewPID(m.Address, settleActorName), msg, s.timeout).Result()
			if err == nil {
				if a, ok := res.(*controlv1.Applied); !ok {
					err = fmt.Errorf("answered %T", res)
				} else if a.GetError() != "" {
					err = fmt.Errorf("%s", a.GetError())
				}
			}
			if err != nil && ctx.Err() == nil {
				s.logger.Warn("a member did not apply a command in time; a publish there may miss it until it does",
					slog.String("member", m.Address), slog.String("position", pos.String()), slog.Any("error", err))
			}
		})
	}
	wg.Wait()
	return ctx.Err()
}

// settleActor answers the other members' WaitApplied, each in a goroutine
// of its own.
type settleActor struct{ s *settlement }

func (a *settleActor) Receive(ctx actor.Context) {
	m, ok := ctx.Message().(*controlv1.WaitApplied)
	if !ok {
		return
	}
	root, sender := ctx.ActorSystem().Root, ctx.Sender()
	go func() {
		wctx, cancel := context.WithTimeout(context.Background(), a.s.timeout)
		defer cancel()
		out := &controlv1.Applied{}
		if err := a.s.runner.WaitFor(wctx, events.Position{Commit: m.GetCommit(), Prepare: m.GetPrepare()}); err != nil {
			out.Error = err.Error()
		}
		root.Send(sender, out)
	}()
}

// startSettleActor spawns this node's settle actor.
func startSettleActor(n *Node, s *settlement) error {
	if _, err := n.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &settleActor{s: s} }), settleActorName); err != nil {
		return fmt.Errorf("start settle actor: %w", err)
	}
	return nil
}
