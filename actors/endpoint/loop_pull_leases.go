package endpoint

import (
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// pullLeases hands a pull endpoint's ready deliveries to its consumer as
// leases (PullDeliveries, command_pull.go), and records the outcome of
// each: a success when acknowledged, a failed attempt when the lease ends
// first. Owned by the actor, like the loop.
type pullLeases struct {
	l *loop
	// count is the number of flights in stageLeased.
	count int
}

// take takes up to n ready flights, signs each as an attempt started now
// and leases it for d. A flight whose tenant's payloads were erased since
// it was read ends failed instead, unseen; while the endpoint's partition
// drains for a hand-over it leases none (the consumer's next pull reaches
// the next owner).
func (p *pullLeases) take(ctx actor.Context, n int, d time.Duration) ([]*controlv1.PulledMessage, error) {
	l, now := p.l, p.l.cfg.Now()
	var out []*controlv1.PulledMessage
	for len(out) < n && len(l.ready) > 0 {
		f := l.ready[0]
		if f.erased(l.cfg.Payloads) {
			l.ready = l.ready[1:]
			l.recordGone(ctx, f, hooklinev1.ErrorClass_ERROR_CLASS_ERASED, "the tenant's payloads were erased before the pull")
			continue
		}
		req, err := attemptRequest(l.state, l.cfg.Keyring, l.cfg.Now, f)
		if err != nil {
			return out, err
		}
		h, err := attempt.Headers(req, now)
		if err != nil {
			return out, err
		}
		until := now.Add(d)
		if !l.cfg.Drain.Lease(Running{EndpointID: l.id, DeliveryID: f.item.DeliveryID, Attempt: f.d.attempts + 1, Until: until.Add(l.cfg.IOTimeout)}) {
			break // the partition is being handed over: the next owner offers it
		}
		l.ready = l.ready[1:]
		l.holds.started(f, now, l.cfg.Spans != nil)
		f.stage, f.leasedAt, f.leasedUntil = stageLeased, now, until
		p.count++
		l.noteDue(f.leasedUntil)
		m := &controlv1.PulledMessage{
			DeliveryId: f.item.DeliveryID, EventId: f.item.EventID, Type: f.eventType(),
			Headers: map[string]string{}, Body: req.Payload, LeaseExpiresAt: timestamppb.New(f.leasedUntil),
		}
		for k, v := range h {
			m.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
		}
		out = append(out, m)
	}
	return out, nil
}

// expire records the leases that ended unacknowledged as failed attempts,
// and returns when the next one ends (zero: none).
func (p *pullLeases) expire(ctx actor.Context, now time.Time) time.Time {
	var next time.Time
	for _, f := range p.l.flights {
		if f.stage != stageLeased {
			continue
		}
		if now.Before(f.leasedUntil) {
			next = earliestOf(next, f.leasedUntil)
			continue
		}
		p.settle(ctx, f, attempt.Outcome{
			Started: f.leasedAt, Finished: now, Latency: now.Sub(f.leasedAt), Class: attempt.Retryable{},
			ErrorClass: hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT,
			Error:      fmt.Sprintf("pulled, not acknowledged within its %v lease", f.leasedUntil.Sub(f.leasedAt).Round(time.Second)),
		})
	}
	return next
}

// settle records a leased flight's outcome. The Drain lists the lease
// until the outcome is recorded, as it does an attempt (busy).
func (p *pullLeases) settle(ctx actor.Context, f *flight, o attempt.Outcome) {
	l := p.l
	p.count--
	f.busy = true
	l.busy++
	f.outcome = &o
	ev, next := outcomeEvent(l.cfg, l.id, l.state, f, o, l.cfg.Now())
	l.noteDue(next)
	l.record(ctx, f, ev)
}

// forget lets go of a leased flight's lease without an outcome (the
// grain stops, or retires: a hand-over lists the lease).
func (p *pullLeases) forget(f *flight) {
	if f.stage == stageLeased {
		p.count--
		p.l.cfg.Drain.End(p.l.id, f.item.DeliveryID)
	}
}
