package endpoint

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The life of one flight: read its streams, wait for the limits and a slot,
// attempt, record the outcome (record.go).

// stage is where a held delivery stands.
type stage uint8

const (
	stageReading   stage = iota // its streams are being read
	stageReady                  // waiting for the limits and a slot
	stageRunning                // the HTTP attempt is out
	stageRecording              // its outcome is being appended
)

// flight is a delivery the grain holds, from the pull (or the replay
// order) until its outcome is durable. While held, later pulls skip it,
// and every append to its stream goes through it, one at a time.
type flight struct {
	item  due.Item
	stage stage
	// d is what its streams say, kept up to date with the grain's appends.
	d deliveryRead
	// fresh is set for a first attempt of a new delivery whose stream was
	// not read (there is nothing in it yet): its outcome is appended
	// expecting no stream, and read then if there is one after all.
	fresh bool
	// suspect is set for a delivery the due index offered although the
	// grain settled it: its stream is read, never taken for fresh.
	suspect bool

	probe bool // the breaker's half-open probe
	// outcome is the attempt's result, kept until it is durable: it is
	// recorded again against the stream if a fresh flight's stream existed.
	outcome *attempt.Outcome
	// replays are replays that came while the delivery was held; they are
	// carried out once its current outcome is durable. asking is the one
	// whose ReplayRequested is being appended.
	replays []*replayOrder
	asking  *replayOrder
	// lin is what its current attempt noted on its way (lineage.go).
	lin flightLineage
}

// class is what f asks a slot for: a replay asks as a retry, whatever
// its item says.
func (f *flight) class() due.Class {
	if f.item.Class == due.ClassNew && f.d.replay == nil {
		return due.ClassNew
	}
	return due.ClassRetry
}

type (
	readDone struct {
		id  string
		r   deliveryRead
		err error
	}
	slotGranted struct{}
	attemptDone struct {
		id string
		o  attempt.Outcome
	}
)

// read reads a flight's delivery stream and event off the mailbox. A
// first attempt of a new delivery reads only the event, and not even that
// when the node's cache has it.
func (g *grain) read(ctx actor.Context, f *flight) {
	f.stage = stageReading
	f.fresh = !f.suspect && f.item.Class == due.ClassNew && !f.item.Manual && f.item.Attempts == 0 && f.d.event == nil && len(f.replays) == 0
	if f.fresh {
		if ev := g.cfg.events.get(eventStream(f.item)); ev != nil {
			f.d = deliveryRead{autoPending: true, event: ev}
			g.settle(ctx, f)
			return
		}
	}
	g.loop.reading++
	log, cache, it, page, ev, fresh := g.cfg.Log, g.cfg.events, f.item, g.cfg.ReadPage, f.d.event, f.fresh
	g.async(ctx, g.cfg.IOTimeout, func(c context.Context) any {
		r, err := readDelivery(c, log, cache, it, page, ev, !fresh)
		return &readDone{id: it.DeliveryID, r: r, err: err}
	})
}

func (g *grain) onRead(ctx actor.Context, m *readDone) {
	g.loop.reading--
	f := g.loop.flights[m.id]
	if f == nil || f.stage != stageReading {
		return
	}
	if m.err != nil {
		// It stays due; the next wake (at the latest the sweeper's) tries
		// again.
		g.log.Warn("endpoint grain cannot read a delivery", "delivery_id", m.id, "error", m.err)
		g.drop(ctx, f)
		g.pump(ctx)
		return
	}
	f.d = m.r
	if f.outcome != nil {
		g.recordAgain(ctx, f) // a fresh flight's stream existed after all
		return
	}
	if len(f.replays) > 0 {
		g.appendReplay(ctx, f)
		return
	}
	g.settle(ctx, f)
	g.pump(ctx)
}

// settle decides what a flight whose streams are known needs: nothing yet
// (it ended, or it is not due before the time its stream says), an end
// without attempt (deleted endpoint, deadline passed, event gone) or an
// attempt (it joins the ready flights). The caller pumps.
func (g *grain) settle(ctx actor.Context, f *flight) {
	now := g.cfg.Now()
	switch {
	case f.d.ended && !g.replanned(f):
		g.drop(ctx, f)
	case g.state.Deleted:
		g.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ENDPOINT_GONE, "the endpoint was deleted before the attempt")
	case f.d.replay == nil && g.expired(f, now):
		g.expire(ctx, f, now)
	case f.d.replay == nil && f.d.lastNext.After(now):
		// The stream says later than the index did (a stale view): never
		// before the stream's next_attempt_at.
		g.drop(ctx, f)
		g.noteDue(f.d.lastNext)
	case f.d.event == nil:
		g.eventMissing(ctx, f, now)
	default:
		g.enqueue(f)
	}
}

// replanned reports whether an ended delivery was planned again after it
// ended: its event id was published anew once its event stream had expired
// while its delivery stream survived. The plan is new work on the same
// delivery id, attempted on the same stream; without this, its item would
// stay due forever, dropped on every pull.
func (g *grain) replanned(f *flight) bool {
	if f.item.Class != due.ClassNew || f.item.PlannedAt.IsZero() || !f.item.PlannedAt.After(f.d.lastAt) {
		return false
	}
	f.d.ended, f.d.autoPending, f.d.lastNext = false, true, time.Time{}
	f.d.autosBefore = f.d.attempts - f.d.manuals
	return true
}

// eventMissing handles a delivery whose event stream was not found. After
// the log's retention (the event is gone for good) the delivery ends
// failed. Before it, the stream must exist (it is written before the plan
// that made the delivery), so the read saw a backend that lags (a follower
// behind its leader): the delivery stays due and is read again shortly.
func (g *grain) eventMissing(ctx actor.Context, f *flight, now time.Time) {
	if planned := f.item.PlannedAt; !planned.IsZero() && now.Sub(planned) < g.cfg.EventRetention {
		g.log.Warn("endpoint grain did not find a delivery's event; reading it again shortly", "delivery_id", f.item.DeliveryID)
		g.drop(ctx, f)
		g.noteDue(now.Add(eventRetryDelay))
		return
	}
	g.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, "the event is no longer in the log (retention)")
}

// eventRetryDelay is how long a delivery whose event was not found waits
// before it is read again.
const eventRetryDelay = 5 * time.Second

// expire ends a delivery past its deadline without an attempt.
func (g *grain) expire(ctx actor.Context, f *flight, now time.Time) {
	g.record(ctx, f, &hooklinev1.DeliveryExpired{
		TenantId: f.item.TenantID, EndpointId: g.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
		Attempts: f.d.attempts, ExpiresAt: timestamppb.New(f.item.ExpiresAt), At: timestamppb.New(now),
	})
}

// recordGone ends a delivery as failed without an HTTP attempt.
func (g *grain) recordGone(ctx actor.Context, f *flight, class hooklinev1.ErrorClass, text string) {
	now := g.cfg.Now()
	o := attempt.Outcome{Started: now, Finished: now, ErrorClass: class, Error: text}
	a := g.attemptRecord(f, o, f.d.attempts+1)
	a.Retry = endedDecision(text)
	g.record(ctx, f, &hooklinev1.AttemptFailed{Attempt: a})
}

// acquire asks the dispatcher for a slot of class c; the grant comes back
// as a message.
func (g *grain) acquire(ctx actor.Context, c due.Class) {
	if g.cfg.Dispatcher == nil {
		ctx.Send(ctx.Self(), &slotGranted{})
		return
	}
	root, self := ctx.ActorSystem().Root, ctx.Self()
	g.cfg.Dispatcher.Acquire(g.state.TenantID, g.id, c, func() { root.Send(self, &slotGranted{}) })
}

func (g *grain) release() {
	if g.cfg.Dispatcher != nil {
		g.cfg.Dispatcher.Release(g.state.TenantID, g.id)
	}
}

// onSlot gives a granted slot to the first ready flight that may start,
// and starts its attempt. A flight past its deadline ends instead (it may
// have waited for a slot across it). A slot nobody may use goes back.
func (g *grain) onSlot(ctx actor.Context) {
	l := g.loop
	l.asks = max(l.asks-1, 0)
	probe := l.probeAsked
	l.probeAsked = false
	switch {
	case !g.attempting() || len(l.ready) == 0 || l.running >= g.maxInFlight():
		g.release()
		if probe {
			l.breaker.Cancel()
		}
		g.pump(ctx)
		return
	case l.breaker.State() == controlv1.Endpoint_CIRCUIT_OPEN,
		l.breaker.State() == controlv1.Endpoint_CIRCUIT_HALF_OPEN && !probe:
		// Asked before the circuit opened: the circuit decides now.
		g.release()
		g.pump(ctx)
		return
	}
	now := g.cfg.Now()
	var f *flight
	for len(l.ready) > 0 && f == nil {
		f = l.ready[0]
		l.ready = l.ready[1:]
		if f.d.replay == nil && g.expired(f, now) {
			g.expire(ctx, f, now)
			f = nil
		}
	}
	if f == nil {
		g.release()
		if probe {
			l.breaker.Cancel()
		}
		g.pump(ctx)
		return
	}
	l.running++
	f.stage, f.probe = stageRunning, probe
	g.startLineage(f, now)
	req, err := g.request(f)
	if err != nil {
		g.log.Error("endpoint grain cannot open its signing secrets", "delivery_id", f.item.DeliveryID, "error", err)
		f.lin.traced = false // no request carried it
		ctx.Send(ctx.Self(), &attemptDone{id: f.item.DeliveryID, o: attempt.Outcome{
			Started: now, Finished: now, Class: attempt.Retryable{},
			ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_INTERNAL, Error: "cannot open the signing secret",
		}})
		return
	}
	client, id := g.cfg.Attempts, f.item.DeliveryID
	g.async(ctx, attempt.MaxAttemptTimeout+g.cfg.IOTimeout, func(c context.Context) any {
		return &attemptDone{id: id, o: client.Do(c, req)}
	})
	g.pump(ctx) // the next ready flight may ask for a slot
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
	traceparent, tracestate := f.traceHeaders()
	return attempt.Request{
		URL: g.state.Config.GetUrl(), DeliveryID: f.item.DeliveryID, EventID: f.item.EventID, EventType: f.eventType(),
		OccurredAt: asTime(ev.GetOccurredAt()), SchemaVersion: ev.GetSchemaVersion(),
		Payload: ev.GetPayload(), ContentType: ev.GetContentType(), Secrets: secrets, SigningKey: seed,
		Traceparent: traceparent, Tracestate: tracestate,
		Timeout: time.Duration(g.state.Config.GetTimeoutMs()) * time.Millisecond, Now: g.cfg.Now,
	}, nil
}

// onAttempt feeds an outcome to the breaker (a circuit transition, or a
// pause on 410, goes to the endpoint stream) and records the delivery's
// outcome.
func (g *grain) onAttempt(ctx actor.Context, m *attemptDone) {
	l := g.loop
	g.release()
	l.running--
	f := l.flights[m.id]
	if f == nil || f.stage != stageRunning {
		g.pump(ctx)
		return
	}
	o, now := m.o, g.cfg.Now()
	g.log.Debug("attempt", "delivery_id", m.id, "attempt", f.d.attempts+1, "status", o.Status, "class", o.Class.String())
	var circuit proto.Message
	switch c := o.Class.(type) {
	case attempt.Success:
		circuit = l.breaker.Succeeded(now, f.probe)
	case attempt.Permanent:
		circuit = l.breaker.Succeeded(now, f.probe)
		if c.Gone && !l.gone && g.state.Live() && g.state.Status == controlv1.Endpoint_STATUS_ACTIVE {
			l.gone = true
			g.log.Warn("endpoint answered 410 Gone; pausing it", "delivery_id", m.id)
			g.queueOwn(&hooklinev1.EndpointPaused{
				TenantId: g.state.TenantID, EndpointId: g.id, Reason: hooklinev1.EndpointPaused_REASON_GONE,
				IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_SYSTEM, Id: "delivery"},
				At:       timestamppb.New(now), DeliveryId: m.id,
			})
		}
	case attempt.Retryable:
		circuit = l.breaker.Failed(now, c.OpensCircuitSooner, o.ErrorClass, f.probe)
	}
	f.probe = false
	if circuit != nil {
		g.queueOwn(circuit)
	}
	f.outcome = &o
	g.record(ctx, f, g.outcomeEvent(f, o, now))
	g.pump(ctx)
}

// outcomeEvent is the delivery event of an attempt's outcome, numbered
// after the attempts the flight knows of.
func (g *grain) outcomeEvent(f *flight, o attempt.Outcome, now time.Time) proto.Message {
	n := f.d.attempts + 1
	a := g.attemptRecord(f, o, n)
	switch o.Class.(type) {
	case attempt.Success:
		return &hooklinev1.AttemptSucceeded{Attempt: a}
	case attempt.Retryable:
		failed := &hooklinev1.AttemptFailed{Attempt: a, Retryable: true}
		if o.HasRetryAfter && o.RetryDelay() > 0 {
			failed.RetryAfterMs = o.RetryDelay().Milliseconds()
		}
		// Decided as of the answer (its Retry-After counts from then), not
		// of when the grain got to it: the attempt's record then says
		// next = finished + the delay applied.
		at := now
		if !o.Finished.IsZero() {
			at = o.Finished
		}
		next, decision := g.nextAttempt(f, n, o, at)
		a.Retry = decision
		if !next.IsZero() {
			failed.NextAttemptAt = timestamppb.New(next)
			g.noteDue(next)
		}
		return failed
	}
	a.Retry = permanentDecision(o)
	return &hooklinev1.AttemptFailed{Attempt: a}
}
