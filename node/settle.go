package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
)

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
	node    *cluster.Node
	runner  *projections.Runner
	timeout time.Duration
	logger  *slog.Logger
}

// WaitFor implements control.Projections.
func (s *settlement) WaitFor(ctx context.Context, pos events.Position) error {
	_, err := s.waitFor(ctx, pos)
	return err
}

// WaitForEvery is WaitFor that also fails, naming them, when members did
// not confirm in time: an erasure is not done while a member may still
// open payloads with a key it holds in memory.
func (s *settlement) WaitForEvery(ctx context.Context, pos events.Position) error {
	late, err := s.waitFor(ctx, pos)
	if err == nil && len(late) > 0 {
		err = fmt.Errorf("members %s did not confirm in time that they applied position %s", strings.Join(late, ", "), pos)
	}
	return err
}

// waitFor waits for this node's projections, then for every other
// member's, and returns the members that did not confirm in time.
func (s *settlement) waitFor(ctx context.Context, pos events.Position) ([]string, error) {
	if err := s.runner.WaitFor(ctx, pos); err != nil {
		return nil, err
	}
	msg := &internalv1.WaitApplied{Commit: pos.Commit, Prepare: pos.Prepare}
	if d, ok := ctx.Deadline(); ok {
		msg.WaitMs = max(time.Until(d).Milliseconds(), 1)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards late
		late []string
	)
	for _, m := range s.node.Members() {
		if m.Address == s.node.Address() {
			continue
		}
		wg.Go(func() {
			a, err := ask[*internalv1.Applied](ctx, s.node, m.Address, settleService, msg, s.timeout)
			if err == nil && a.GetError() != "" {
				err = errors.New(a.GetError())
			}
			if err != nil && ctx.Err() == nil {
				s.logger.Warn("a member did not apply a command in time; a publish there may miss it until it does",
					slog.String("member", m.Address), slog.String("position", pos.String()), slog.Any("error", err))
				mu.Lock()
				late = append(late, m.Address)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(late)
	return late, ctx.Err()
}

// serve waits, for another member, until this node's projections have
// applied a position.
func (s *settlement) serve(ctx context.Context, msg proto.Message) proto.Message {
	m, ok := msg.(*internalv1.WaitApplied)
	if !ok {
		return nil
	}
	out := &internalv1.Applied{}
	if ms := m.GetWaitMs(); ms > 0 {
		// No longer than the asking call may wait.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
		defer cancel()
	}
	if err := s.runner.WaitFor(ctx, events.Position{Commit: m.GetCommit(), Prepare: m.GetPrepare()}); err != nil {
		out.Error = err.Error()
	}
	return out
}
