package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
)

// A service is a named actor that every member runs beside its grains, for
// the node's own traffic between members (a search's part, a reconcile's
// part, a wait for the projections). Unlike a grain it is not placed: a
// caller names the member.

// Handler answers one request sent to a service; it runs in a goroutine
// of its own, off the service's mailbox, under a context bounded by the
// service's timeout. A nil answer sends nothing back.
type Handler func(ctx context.Context, msg proto.Message) proto.Message

// Serve starts the service name on this member: every request sent to it
// with [Node.Ask] from any member is answered by h, concurrently.
func (n *Node) Serve(name string, timeout time.Duration, h Handler) error {
	return n.spawn(name, func(ctx actor.Context) {
		msg, ok := ctx.Message().(proto.Message)
		if !ok {
			return
		}
		root, sender := ctx.ActorSystem().Root, ctx.Sender()
		go func() {
			hctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			if out := h(hctx, msg); out != nil && sender != nil {
				root.Send(sender, out)
			}
		}()
	})
}

// Receive starts the one-way service name on this member: every message
// sent to it with [Node.Send] is handed to h on the service's mailbox, one
// at a time, in the order they arrived. h must not block.
func (n *Node) Receive(name string, h func(msg proto.Message)) error {
	return n.spawn(name, func(ctx actor.Context) {
		if msg, ok := ctx.Message().(proto.Message); ok {
			h(msg)
		}
	})
}

func (n *Node) spawn(name string, receive actor.ReceiveFunc) error {
	if _, err := n.system.Root.SpawnNamed(actor.PropsFromFunc(receive), name); err != nil {
		return fmt.Errorf("start %s service: %w", name, err)
	}
	return nil
}

// Ask sends msg to the service name on the member at addr and waits for
// its answer, at most timeout (0: [Config.RequestTimeout]) and ctx's
// deadline.
func (n *Node) Ask(ctx context.Context, addr, name string, msg proto.Message, timeout time.Duration) (any, error) {
	if timeout == 0 {
		timeout = n.cfg.RequestTimeout
	}
	if d, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(d))
	}
	if timeout <= 0 {
		return nil, context.DeadlineExceeded
	}
	return n.system.Root.RequestFuture(actor.NewPID(addr, name), msg, timeout).Result()
}

// Send sends msg to the service name on the member at addr without
// waiting: a hint, which may be lost.
func (n *Node) Send(addr, name string, msg proto.Message) {
	n.system.Root.Send(actor.NewPID(addr, name), msg)
}

// RequestTimeout is the bound of one request to a grain or a service
// ([Config.RequestTimeout] with its default).
func (n *Node) RequestTimeout() time.Duration { return n.cfg.RequestTimeout }

// Active returns how many grains of kind are active on this node.
func (n *Node) Active(kind string) int {
	if ak, ok := n.cluster.TryGetClusterKind(kind); ok {
		return int(ak.Count())
	}
	return 0
}
