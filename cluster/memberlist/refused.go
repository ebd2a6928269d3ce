package memberlist

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"syscall"
	"time"

	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	hml "github.com/hashicorp/memberlist"
	"github.com/hookline/hookline/internal/pause"
)

// A member whose process is gone is told apart from a slow one at once by
// its own host: a connection to a port nothing listens on any more is
// refused. memberlist's failure detector cannot tell the two apart and
// needs probe rounds and a suspicion period (about a second with the
// default timing); a process that crashed or was killed loses its
// connections to the other members the moment it ends, and protoactor
// reports each of them. On such a report the provider dials the member's
// actor and gossip ports; when both refuse, nothing of the member listens
// any more, and it is left out of the topology at once, without waiting
// for memberlist. Silence (a stalled process, a lost network) proves
// nothing and is left to memberlist. A refused member is dialled again
// every refusedRecheck: if it answers (the same ports taken by a new
// process), the mark is dropped and memberlist decides; memberlist
// dropping the member drops the mark too.
const (
	// refusedDial bounds one dial of a refused check.
	refusedDial = 250 * time.Millisecond
	// refusedRecheck is how often a member taken for dead on refusal is
	// dialled again while memberlist still lists it.
	refusedRecheck = time.Second
	// refusedTries is how many times a member whose connection was lost
	// is dialled, refusedAgain apart, before the loss is taken for a
	// network's and left to memberlist: a process that is ending closes
	// its connections and its listeners a moment apart.
	refusedTries = 4
	refusedAgain = 150 * time.Millisecond
)

// watchRefused follows protoactor's reports of lost connections until ctx
// ends, checking each member they name.
func (p *Provider) watchRefused(ctx context.Context, ml *hml.Memberlist, es *eventstream.EventStream) {
	defer p.loops.Done()
	lost := make(chan string, eventBuffer)
	sub := es.Subscribe(func(ev any) {
		if t, ok := ev.(*remote.EndpointTerminatedEvent); ok {
			select {
			case lost <- t.Address:
			default: // a burst: the member is being checked already
			}
		}
	})
	defer es.Unsubscribe(sub)
	for {
		select {
		case <-ctx.Done():
			return
		case addr := <-lost:
			id, gossip, ok := p.memberAt(ml, addr)
			if !ok {
				continue
			}
			p.mu.Lock()
			checking := p.checking[id]
			p.checking[id] = true
			p.mu.Unlock()
			if !checking {
				p.loops.Add(1)
				go p.checkRefused(ctx, ml, id, addr, gossip)
			}
		}
	}
}

// memberAt returns the id and gossip address of the listed member, other
// than this node, whose actor address is addr.
func (p *Provider) memberAt(ml *hml.Memberlist, addr string) (id, gossip string, ok bool) {
	self := ml.LocalNode().Name
	for _, n := range p.nodes.live() {
		m, err := decodeMeta(n.Meta)
		if err != nil || n.Name == self || net.JoinHostPort(m.Host, strconv.Itoa(m.Port)) != addr {
			continue
		}
		return n.Name, n.Address(), true
	}
	return "", "", false
}

// checkRefused dials the member's two ports a few times: if both refuse,
// it marks the member dead and keeps dialling until it answers or
// memberlist drops it.
func (p *Provider) checkRefused(ctx context.Context, ml *hml.Memberlist, id, addr, gossip string) {
	defer p.loops.Done()
	defer func() {
		p.mu.Lock()
		delete(p.checking, id)
		changed := p.refused[id]
		delete(p.refused, id)
		p.mu.Unlock()
		if changed {
			p.signal()
		}
	}()
	for tries := 1; ; tries++ {
		if _, _, listed := p.memberAt(ml, addr); !listed {
			return // memberlist dropped it (or it is another member now)
		}
		dead := Refuses(ctx, addr) && Refuses(ctx, gossip)
		p.mu.Lock()
		was := p.refused[id]
		p.refused[id] = dead
		p.mu.Unlock()
		switch {
		case dead && !was:
			p.cfg.Logger.Warn("member refuses connections on its actor and gossip ports; taken for dead before the failure detector",
				slog.String("member_id", id), slog.String("address", addr), slog.String("gossip_address", gossip))
			p.signal()
		case !dead && was:
			p.cfg.Logger.Info("member answers again; memberlist decides", slog.String("member_id", id))
			p.signal()
		case !dead && tries >= refusedTries:
			return // it answers: a lost connection, not a lost member
		}
		wait := refusedRecheck
		if !dead {
			wait = refusedAgain // a process that is ending may still listen
		}
		if pause.For(ctx, wait) != nil {
			return
		}
	}
}

// Refuses reports whether a TCP connection to addr is refused: nothing
// listens there. A connection made, a timeout or any other error is not a
// refusal.
func Refuses(ctx context.Context, addr string) bool {
	d := net.Dialer{Timeout: refusedDial}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		_ = c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
