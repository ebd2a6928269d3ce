package endpoint

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The life of one flight: read its streams, wait for the limits and a slot,
// attempt, record the outcome (record.go).

type (
	readDone struct {
		id  string
		r   deliveryRead
		err error
	}
	slotGranted struct{ id string }
	attemptDone struct {
		id string
		o  attempt.Outcome
	}
)

// read reads a flight's delivery stream and event off the mailbox.
func (g *grain) read(ctx actor.Context, f *flight) {
	f.stage = stageReading
	log, cache, it, page, ev := g.cfg.Log, g.cfg.events, f.item, g.cfg.ReadPage, f.d.event
	g.async(ctx, g.cfg.IOTimeout, func(c context.Context) any {
		r, err := readDelivery(c, log, cache, it, page, ev)
		return &readDone{id: it.DeliveryID, r: r, err: err}
	})
}

func (g *grain) onRead(ctx actor.Context, m *readDone) {
	f := g.eng.flights[m.id]
	if f == nil || f.stage != stageReading {
		return
	}
	if m.err != nil {
		// It stays due; the next wake (at the latest the sweeper's) tries
		// again.
		g.log.Warn("endpoint grain cannot read a delivery", "delivery_id", m.id, "err", m.err)
		g.drop(ctx, f)
		return
	}
	f.d = m.r
	if len(f.replays) > 0 {
		g.appendReplay(ctx, f)
		return
	}
	g.settle(ctx, f)
}

// settle decides what a flight whose streams are known needs: nothing (it
// ended: the index lagged), an end without attempt (deleted endpoint,
// payload gone, deadline passed) or an attempt.
func (g *grain) settle(ctx actor.Context, f *flight) {
	now := g.cfg.Now()
	switch {
	case f.d.ended:
		g.drop(ctx, f)
	case g.state.Deleted:
		g.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE, "the endpoint was deleted before the attempt")
	case f.d.event == nil:
		g.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, "the event is no longer in the log (retention)")
	case f.d.replay == nil && g.expired(f, now):
		g.record(ctx, f, &hooklinev1.DeliveryExpired{
			TenantId: f.item.TenantID, EndpointId: g.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
			Attempts: f.d.attempts, ExpiresAt: timestamppb.New(f.item.ExpiresAt), At: timestamppb.New(now),
		})
	default:
		g.enqueue(f)
		g.pump(ctx)
	}
}

// recordGone ends a delivery as failed without an HTTP attempt.
func (g *grain) recordGone(ctx actor.Context, f *flight, class hooklinev1.ErrorClass, text string) {
	now := g.cfg.Now()
	o := attempt.Outcome{Started: now, Finished: now, ErrorClass: class, Error: text}
	g.record(ctx, f, &hooklinev1.AttemptFailed{Attempt: g.attemptRecord(f, o, f.d.attempts+1)})
}

// acquire asks the dispatcher for a slot for f; the grant comes back as a
// message.
func (g *grain) acquire(ctx actor.Context, f *flight) {
	id := f.item.DeliveryID
	if g.cfg.Dispatcher == nil {
		ctx.Send(ctx.Self(), &slotGranted{id: id})
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	g.cfg.Dispatcher.Acquire(g.state.TenantID, g.id, f.class(), func() { root.Send(self, &slotGranted{id: id}) })
}

func (g *grain) release() {
	if g.cfg.Dispatcher != nil {
		g.cfg.Dispatcher.Release(g.state.TenantID, g.id)
	}
}

// onSlot starts the attempt of a flight that got its slot.
func (g *grain) onSlot(ctx actor.Context, m *slotGranted) {
	e := g.eng
	f := e.flights[m.id]
	if f == nil || f.stage != stageAsking {
		g.release()
		return
	}
	if !g.attempting() {
		// Paused (or gone) while it waited: back in line, slot returned.
		g.release()
		e.running--
		if f.probe {
			e.breaker.Cancel()
			f.probe = false
		}
		g.enqueue(f)
		return
	}
	f.stage = stageRunning
	req, err := g.request(f)
	if err != nil {
		g.log.Error("endpoint grain cannot open its signing secrets", "delivery_id", m.id, "err", err)
		now := g.cfg.Now()
		ctx.Send(ctx.Self(), &attemptDone{id: m.id, o: attempt.Outcome{
			Started: now, Finished: now, Class: attempt.Retryable{},
			ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, Error: "cannot open the signing secret",
		}})
		return
	}
	client := g.cfg.Attempts
	g.async(ctx, attempt.MaxAttemptTimeout+g.cfg.IOTimeout, func(c context.Context) any {
		return &attemptDone{id: m.id, o: client.Do(c, req)}
	})
}

// request builds an attempt: the stored bytes, signed with every live
// secret (the current one included, so a replay uses the current secret).
func (g *grain) request(f *flight) (attempt.Request, error) {
	secrets, err := g.state.LiveSecrets(g.cfg.Keyring)
	if err != nil {
		return attempt.Request{}, err
	}
	seed, err := g.state.SigningKey(g.cfg.Keyring)
	if err != nil {
		return attempt.Request{}, err
	}
	ev := f.d.event
	return attempt.Request{
		URL: g.state.Config.GetUrl(), DeliveryID: f.item.DeliveryID, EventID: f.item.EventID, EventType: f.eventType(),
		OccurredAt: asTime(ev.GetOccurredAt()), SchemaVersion: ev.GetSchemaVersion(),
		Payload: ev.GetPayload(), ContentType: ev.GetContentType(), Secrets: secrets, SigningKey: seed,
		Timeout: time.Duration(g.state.Config.GetTimeoutMs()) * time.Millisecond, Now: g.cfg.Now,
	}, nil
}

// onAttempt turns an outcome into its events: the delivery's outcome, and
// the endpoint's circuit transition or pause on 410.
func (g *grain) onAttempt(ctx actor.Context, m *attemptDone) {
	e := g.eng
	g.release()
	e.running--
	f := e.flights[m.id]
	if f == nil || f.stage != stageRunning {
		return
	}
	o, now, n := m.o, g.cfg.Now(), f.d.attempts+1
	a := g.attemptRecord(f, o, n)
	g.log.Debug("attempt", "delivery_id", m.id, "attempt", n, "status", o.Status, "class", o.Class.String())
	var msg, circuit proto.Message
	switch c := o.Class.(type) {
	case attempt.Success:
		msg = &hooklinev1.AttemptSucceeded{Attempt: a}
		circuit = e.breaker.Succeeded(now, f.probe)
	case attempt.Permanent:
		msg = &hooklinev1.AttemptFailed{Attempt: a}
		circuit = e.breaker.Succeeded(now, f.probe)
		if c.Gone && !e.gone && g.state.Live() && g.state.Status == controlv1.Endpoint_STATUS_ACTIVE {
			e.gone = true
			g.log.Warn("endpoint answered 410 Gone; pausing it", "delivery_id", m.id)
			g.queueOwn(&hooklinev1.EndpointPaused{
				TenantId: g.state.TenantID, EndpointId: g.id, Reason: hooklinev1.EndpointPaused_REASON_GONE,
				IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "delivery"},
				At:       timestamppb.New(now), DeliveryId: m.id,
			})
		}
	case attempt.Retryable:
		failed := &hooklinev1.AttemptFailed{Attempt: a, Retryable: true}
		if o.HasRetryAfter && o.RetryDelay() > 0 {
			failed.RetryAfterMs = o.RetryDelay().Milliseconds()
		}
		if next := g.nextAttempt(f, n, o, now); !next.IsZero() {
			failed.NextAttemptAt = timestamppb.New(next)
			if e.nextDue.IsZero() || next.Before(e.nextDue) {
				e.nextDue = next
			}
		}
		msg = failed
		circuit = e.breaker.Failed(now, c.OpensCircuitSooner, o.ErrorClass, f.probe)
	}
	f.probe = false
	if circuit != nil {
		g.queueOwn(circuit)
	}
	g.record(ctx, f, msg)
	g.pump(ctx)
}
