package endpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// handleListWaits answers what holds each pending delivery asked about
// (the control API's Delivery.wait): what the loop holds it for, else the
// endpoint's own state (paused, its circuit, a pull endpoint), else its
// ordering key's head, read from the due index, else its schedule. It
// changes nothing.
func (g *grain) handleListWaits(ctx actor.Context, r *request) {
	if e := g.checkOwn(r.Cmd.GetTenantId(), "", ""); e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	now := g.cfg.Now()
	waits := map[string]*controlv1.DeliveryWait{}
	var keyed []*internalv1.WaitQuery
	for _, q := range r.Cmd.GetListWaits().GetDeliveries() {
		switch w := g.waitOf(q.GetDeliveryId(), now); {
		case w != nil:
			waits[q.GetDeliveryId()] = w
		case q.GetOrderingKey() != "" && g.cfg.OrderingKeys != nil:
			keyed = append(keyed, q)
		default:
			waits[q.GetDeliveryId()] = g.scheduledWait(q, now)
		}
	}
	if len(keyed) == 0 {
		reply(ctx, r.Sender, &internalv1.EndpointReply{Waits: waits})
		return
	}
	keys, id := g.cfg.OrderingKeys, g.id
	g.core.IO(ctx, r, func(context.Context) (any, error) {
		heads := map[string]due.KeyState{}
		for _, q := range keyed {
			k, ok, err := keys.Key(id, q.GetOrderingKey())
			if err != nil {
				return heads, err
			}
			if ok {
				heads[q.GetOrderingKey()] = k
			}
		}
		return heads, nil
	}, func(res any, err error) {
		if err != nil {
			g.log.Warn("endpoint grain cannot read its ordering keys for the waits", "error", err)
		}
		heads, _ := res.(map[string]due.KeyState)
		for _, q := range keyed {
			k, ok := heads[q.GetOrderingKey()]
			if !ok || k.Head == q.GetDeliveryId() {
				waits[q.GetDeliveryId()] = g.scheduledWait(q, now)
				continue
			}
			detail := fmt.Sprintf("ordering key %q goes one delivery at a time: it waits for %s to end", q.GetOrderingKey(), k.Head)
			if k.Blocked() {
				detail += fmt.Sprintf(", which has failed (hookline endpoints skip-key --id %s --key %s --head %s lets the key move on)", g.id, q.GetOrderingKey(), k.Head)
			}
			waits[q.GetDeliveryId()] = &controlv1.DeliveryWait{Reason: "key_blocked", Detail: detail}
		}
		reply(ctx, r.Sender, &internalv1.EndpointReply{Waits: waits})
	})
}

// waitOf is what holds the delivery id, as the grain knows it without a
// read: its flight's stage, the limit that holds the ready ones, the
// endpoint's status, circuit or delivery mode; nil when none of these.
func (g *grain) waitOf(id string, now time.Time) *controlv1.DeliveryWait {
	l := g.loop
	if l == nil {
		return nil
	}
	if f, ok := l.flights[id]; ok {
		switch f.stage {
		case stageLeased:
			return &controlv1.DeliveryWait{Reason: "leased", Until: timestamppb.New(f.leasedUntil),
				Detail: "leased to the endpoint's consumer, which has not acknowledged it: it is offered again when the lease ends"}
		case stageRunning, stageRecording:
			return &controlv1.DeliveryWait{Reason: "attempting", Detail: "an attempt is out now"}
		case stageElsewhere:
			return &controlv1.DeliveryWait{Reason: "attempting", Detail: "the member that handed its partition over has an attempt out"}
		case stageReading:
			return &controlv1.DeliveryWait{Reason: "due", Detail: "due: its event is being read for an attempt"}
		case stageReady:
			if l.state.Config.GetPull() {
				return g.pullWait()
			}
			return l.holds.wait(now, l.maxInFlight(), l.breaker)
		}
	}
	switch {
	case l.paused():
		return &controlv1.DeliveryWait{Reason: "paused", Detail: fmt.Sprintf("the endpoint is %s: hookline endpoints resume --id %s", statusWord(l.state.Status), g.id)}
	case l.state.Circuit == controlv1.Endpoint_CIRCUIT_OPEN && now.Before(l.state.CircuitUntil):
		return circuitWait(l.state.CircuitUntil)
	}
	return nil
}

// wait is the wait of a ready flight: the limit that holds the endpoint's
// next attempt now. maxInFlight is the endpoint's in-flight limit and b
// its breaker (nil until the loop first checks its limits).
func (h *holds) wait(now time.Time, maxInFlight int, b *Breaker) *controlv1.DeliveryWait {
	switch h.reason {
	case holdInFlight:
		return &controlv1.DeliveryWait{Reason: "in_flight", Detail: fmt.Sprintf("throttled: the endpoint's %d attempts in flight (its max in flight) are out; it goes when one ends", maxInFlight)}
	case holdQuota:
		return &controlv1.DeliveryWait{Reason: "quota", Detail: "throttled: the tenant's quota of attempts is used up for now (hookline tenants get shows it)"}
	case holdBreaker:
		if b != nil && now.Before(b.Until()) {
			return circuitWait(b.Until())
		}
		return &controlv1.DeliveryWait{Reason: "circuit_open", Detail: "the endpoint's circuit breaker is half-open: one probe attempt decides whether attempts flow again"}
	case holdRate:
		return &controlv1.DeliveryWait{Reason: "rate_limit", Detail: "throttled: the endpoint's rate limit (--rate) lets it go shortly"}
	}
	return &controlv1.DeliveryWait{Reason: "slot", Detail: "due: it waits for one of the node's attempt slots, shared fairly among tenants"}
}

// circuitWait is a wait for an open circuit's cool-down to end.
func circuitWait(until time.Time) *controlv1.DeliveryWait {
	return &controlv1.DeliveryWait{Reason: "circuit_open", Until: timestamppb.New(until),
		Detail: "the endpoint's circuit breaker is open after failures in a row: a probe attempt goes when its cool-down ends"}
}

// pullWait is the wait of a due delivery of a pull endpoint.
func (g *grain) pullWait() *controlv1.DeliveryWait {
	return &controlv1.DeliveryWait{Reason: "pull", Detail: fmt.Sprintf("due: it waits for the endpoint's consumer to pull it (hookline endpoints pull --id %s)", g.id)}
}

// scheduledWait is the wait of a delivery nothing holds: its next attempt
// is scheduled later, or it is due now (for a pull endpoint: due to be
// pulled).
func (g *grain) scheduledWait(q *internalv1.WaitQuery, now time.Time) *controlv1.DeliveryWait {
	switch t := q.GetNextAttemptAt(); {
	case t != nil && t.AsTime().After(now):
		return &controlv1.DeliveryWait{Reason: "backoff", Until: t, Detail: "its next attempt is scheduled (the backoff after a failed attempt, or its plan's time)"}
	case g.state.Config.GetPull():
		return g.pullWait()
	}
	return &controlv1.DeliveryWait{Reason: "due", Detail: "due: the endpoint attempts it shortly"}
}
