package endpoint

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Pull delivery. A pull endpoint's deliveries go through the loop as any
// other's (pulled from the due index, their streams read, ready in due
// order), but no request is sent: a consumer's PullDeliveries leases the
// ready ones, with the headers and body a push would send, and its
// AckDeliveries records each as a success. A lease that ends
// unacknowledged is recorded as a failed attempt, so the delivery is
// offered again after its backoff, by a push if the endpoint has switched
// to push meanwhile; a grain that stops forgets its leases, and the
// deliveries, still due in the index, are offered again. A lease is an
// attempt for the node's Drain: a partition being handed over hands out
// none, and its hand-over lists those out, so that the next owner offers
// none of them before its lease has run out.

// Bounds of a pull.
const (
	defaultPullMax   = 10
	maxPullMax       = 100
	defaultLease     = 30 * time.Second
	maxLeaseSeconds  = 600
	maxAckDeliveries = 1000
)

// DefaultPullMax and MaxPullMax bound a pull's max (0 means
// DefaultPullMax); the control API refuses a max out of them before it
// asks the grain.
const (
	DefaultPullMax = defaultPullMax
	MaxPullMax     = maxPullMax
)

// handlePull leases up to the asked number of ready deliveries.
func (g *grain) handlePull(ctx actor.Context, r *request) {
	rq := r.Cmd.GetPull()
	e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId())
	switch {
	case e != nil:
	case !g.state.Config.GetPull():
		e = command.FailedPrecondition("endpoint_id", "endpoint %s is a push endpoint (Hookline POSTs to its url); set settings.delivery to \"pull\" to pull its deliveries", g.id)
	case g.state.Status != controlv1.Endpoint_STATUS_ACTIVE:
		e = command.FailedPrecondition("", "endpoint %s is %s: resume it to pull its deliveries", g.id, statusWord(g.state.Status))
	case rq.GetMax() < 0 || rq.GetMax() > maxPullMax:
		e = command.Invalid("max", "is %d; use 1 to %d (0 means %d)", rq.GetMax(), maxPullMax, defaultPullMax)
	case rq.GetLeaseSeconds() < 0 || rq.GetLeaseSeconds() > maxLeaseSeconds:
		e = command.Invalid("lease_seconds", "is %d; use 1 to %d (0 means %d)", rq.GetLeaseSeconds(), maxLeaseSeconds, int(defaultLease/time.Second))
	}
	if e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	n, lease := int(rq.GetMax()), time.Duration(rq.GetLeaseSeconds())*time.Second
	if n == 0 {
		n = defaultPullMax
	}
	if lease == 0 {
		lease = defaultLease
	}
	msgs, err := g.loop.leased.take(ctx, n, lease)
	if err != nil {
		g.log.Error("endpoint grain cannot lease its deliveries", "error", err)
		reply(ctx, r.Sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "cannot sign the deliveries; retry"))
		return
	}
	reply(ctx, r.Sender, &internalv1.EndpointReply{Pulled: &controlv1.PullDeliveriesResponse{Messages: msgs}})
	g.loop.wake(ctx) // pull more from the index for the next consumer call
}

// handleAck records each leased delivery named as acknowledged.
func (g *grain) handleAck(ctx actor.Context, r *request) {
	rq := r.Cmd.GetAck()
	e := g.checkOwn(r.Cmd.GetTenantId(), rq.GetTenantId(), rq.GetEndpointId())
	switch n := len(rq.GetDeliveryIds()); {
	case e != nil:
	case n == 0:
		e = command.Invalid("delivery_ids", "is empty: list the deliveries to acknowledge")
	case n > maxAckDeliveries:
		e = command.Invalid("delivery_ids", "has %d ids; acknowledge at most %d per call", n, maxAckDeliveries)
	}
	if e != nil {
		refuse(ctx, r.Sender, e)
		return
	}
	res := &controlv1.AckDeliveriesResponse{}
	now := g.cfg.Now()
	for _, id := range rq.GetDeliveryIds() {
		f := g.loop.flights[id]
		if f == nil || f.stage != stageLeased || now.After(f.leasedUntil) {
			res.NotAcked = append(res.NotAcked, id)
			continue
		}
		g.loop.leased.settle(ctx, f, attempt.Outcome{Started: f.leasedAt, Finished: now, Latency: now.Sub(f.leasedAt), Class: attempt.Success{}})
		res.Acked++
	}
	reply(ctx, r.Sender, &internalv1.EndpointReply{Acked: res})
	g.loop.pump(ctx)
}
