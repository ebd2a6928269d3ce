package endpoint

import (
	"context"
	"slices"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/dispatch"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// onSlot gives a granted slot to the first ready flight that may start,
// and starts its attempt. A flight past its deadline ends instead (it may
// have waited for a slot across it). A slot nobody may use goes back.
func (l *loop) onSlot(ctx actor.Context) {
	probe := l.slots.granted()
	switch {
	case !l.attempting() || len(l.ready) == 0 || l.running+l.handover.elsewhere >= l.maxInFlight():
		l.slots.release()
		if probe {
			l.breaker.Cancel()
		}
		l.pump(ctx)
		return
	case l.breaker.State() == controlv1.Endpoint_CIRCUIT_OPEN,
		l.breaker.State() == controlv1.Endpoint_CIRCUIT_HALF_OPEN && !probe:
		// Asked before the circuit opened: the circuit decides now.
		l.slots.release()
		l.pump(ctx)
		return
	}
	now := l.cfg.Now()
	var f *flight
	for len(l.ready) > 0 && f == nil {
		f = l.ready[0]
		l.ready = l.ready[1:]
		switch {
		case f.d.replay == nil && f.expired(now):
			l.expire(ctx, f, now)
			f = nil
		case f.erased(l.cfg.Payloads):
			// Erased while it waited for its slot: never sent.
			l.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ERASED, erasedText)
			f = nil
		}
	}
	if f != nil && !l.cfg.Drain.Begin(runningOf(l.id, l.state, l.cfg.IOTimeout, f, now)) {
		// A drain began since the check above: the flight stays ready,
		// and the slot goes back.
		l.ready = slices.Insert(l.ready, 0, f)
		f = nil
	}
	if f == nil {
		l.slots.release()
		if probe {
			l.breaker.Cancel()
		}
		l.pump(ctx)
		return
	}
	l.running++
	f.busy = true // counted by Begin
	l.busy++
	f.stage, f.probe = stageRunning, probe
	l.holds.started(f, now, l.cfg.Spans != nil)
	req, err := attemptRequest(l.state, l.cfg.Keyring, l.cfg.Now, f)
	if err != nil {
		l.log.Error("endpoint grain cannot open its sealed secrets", "delivery_id", f.item.DeliveryID, "error", err)
		f.lin.traced, f.unsent = false, true // no request carried it
		ctx.Send(ctx.Self(), &attemptDone{id: f.item.DeliveryID, o: attempt.Outcome{
			Started: now, Finished: now, Class: attempt.Retryable{},
			ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, Error: "cannot open a sealed secret of the endpoint (signing secret, secret header, OAuth2 client secret, client key or URL password)",
		}})
		return
	}
	client, id, tenantID, payloads := l.cfg.Attempts, f.item.DeliveryID, f.item.TenantID, l.cfg.Payloads
	under := f.d.event.GetPayloadSeal()
	l.async(ctx, attempt.MaxAttemptTimeout+l.cfg.IOTimeout, func(c context.Context) any {
		// The last look before the payload leaves: the erasure may have
		// been applied since the grain chose the flight.
		if payloads.Erased(tenantID, under.GetDataKeyId()) {
			return &attemptDone{id: id, erased: true}
		}
		done := &attemptDone{id: id, o: client.Do(c, req)}
		done.sealResponse(c, payloads, tenantID, under)
		return done
	})
	l.pump(ctx) // the next ready flight may ask for a slot
}

// onAttempt feeds an outcome to the breaker (a circuit transition, or a
// pause on 410, goes to the endpoint stream) and records the delivery's
// outcome.
func (l *loop) onAttempt(ctx actor.Context, m *attemptDone) {
	if m.erased {
		l.onErasedBeforeSend(ctx, m)
		return
	}
	if m.o.ErrorClass == hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT {
		l.slots.releaseAfter(dispatch.TimedOut)
	} else {
		l.slots.releaseAfter(dispatch.Answered)
	}
	l.running--
	f := l.flights[m.id]
	if f == nil || f.stage != stageRunning {
		l.pump(ctx)
		return
	}
	o, now := m.o, l.cfg.Now()
	l.log.Debug("attempt", "delivery_id", m.id, "attempt", f.d.attempts+1, "status", o.Status, "class", o.Class.String())
	var circuit proto.Message
	switch c := o.Class.(type) {
	case attempt.Success:
		circuit = l.breaker.Succeeded(now, f.probe)
	case attempt.Permanent:
		circuit = l.breaker.Succeeded(now, f.probe)
		if c.Gone && !l.gone && l.state.Live() && l.state.Status == controlv1.Endpoint_STATUS_ACTIVE {
			l.gone = true
			l.log.Warn("endpoint answered 410 Gone; pausing it", "delivery_id", m.id)
			l.queueOwn(&hooklinev1.EndpointPaused{
				TenantId: l.state.TenantID, EndpointId: l.id, Reason: hooklinev1.EndpointPaused_REASON_GONE,
				IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "delivery"},
				At:       timestamppb.New(now), DeliveryId: m.id,
			})
		}
	case attempt.Retryable:
		circuit = l.breaker.Failed(now, c.OpensCircuitSooner, o.ErrorClass, f.probe)
	}
	f.probe = false
	if circuit != nil {
		l.queueOwn(circuit)
	}
	f.outcome, f.responseSeal = &o, m.responseSeal
	ev, next := outcomeEvent(l.cfg, l.id, l.state, f, o, now)
	l.noteDue(next)
	l.record(ctx, f, ev)
	l.pump(ctx)
}

// onErasedBeforeSend ends a flight whose payload was erased between the
// grain's choice and the request: nothing was sent, so the slot and a
// half-open probe go back unused, and the delivery ends ERASED.
func (l *loop) onErasedBeforeSend(ctx actor.Context, m *attemptDone) {
	l.slots.release()
	l.running--
	f := l.flights[m.id]
	if f == nil || f.stage != stageRunning {
		l.pump(ctx)
		return
	}
	if f.probe {
		l.breaker.Cancel()
		f.probe = false
	}
	f.lin.traced = false // no request carried it
	l.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ERASED, erasedText)
	l.pump(ctx)
}

// sealResponse seals the response body's prefix off the grain's mailbox
// (the key may be read from the vault): under the data key of the
// payload it answers (under), so that it is erased with it, or, for a
// payload in clear, under the tenant's current key. A body that cannot be
// sealed is not recorded: never in clear where payloads are sealed, and
// never under a newer key than its payload's, which would outlive the
// payload's erasure (a response that came back after it is dropped).
func (d *attemptDone) sealResponse(ctx context.Context, payloads *seal.Payloads, tenantID string, under *hooklinev1.PayloadSeal) {
	if payloads == nil || len(d.o.ResponsePrefix) == 0 {
		return
	}
	aad := seal.ResponseAAD(tenantID, d.id)
	if under == nil {
		ct, s, err := payloads.Seal(ctx, tenantID, aad, d.o.ResponsePrefix)
		if err != nil {
			d.o.ResponsePrefix = nil
			return
		}
		d.o.ResponsePrefix, d.responseSeal = ct, s
		return
	}
	t, err := payloads.SealUnder(ctx, tenantID, under, aad, d.o.ResponsePrefix)
	switch {
	case err != nil:
		d.o.ResponsePrefix = nil
	case t != nil: // nil: a node that seals nothing new keeps it in clear
		d.o.ResponsePrefix, d.responseSeal = t.GetCiphertext(), t.GetSeal()
	}
}
