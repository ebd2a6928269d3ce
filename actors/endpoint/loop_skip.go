package endpoint

import (
	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// skipOrder is a skip of a key's head to carry out.
type skipOrder struct {
	sender    *actor.PID
	by        *hooklinev1.Actor
	requestID string
	key       due.KeyState
}

// laterSkip is a skip of an ordering key's head that came before the grain
// caught up.
type laterSkip struct {
	o *skipOrder
	d history.Delivery
}

// skips carries out, on the loop, the skips of its ordering keys' heads
// (SkipOrderingKey, command_ordering.go): each holds the head as a flight,
// through which its OrderingKeySkipped is appended. Owned by the actor,
// like the loop.
type skips struct {
	l *loop
	// waiting are skips that came before the grain caught up: they wait
	// for it (waitCatchUp).
	waiting []laterSkip
}

// start holds the key's head as a flight and appends its
// OrderingKeySkipped once its stream is read. A head held already (being
// attempted, or about to be, here or by the partition's previous owner) is
// not skipped under it: the caller retries.
func (s *skips) start(ctx actor.Context, o *skipOrder, d history.Delivery) {
	l := s.l
	if s.waitCatchUp(o, d) {
		return // until the grain knows what its predecessors attempt
	}
	if _, held := l.flights[d.ID]; held {
		reply(ctx, o.sender, errReplyOf(internalv1.GrainError_CODE_UNAVAILABLE, "the key's head "+d.ID+" is being attempted; retry the skip in a moment"))
		return
	}
	f := &flight{item: due.Item{
		DeliveryID: d.ID, TenantID: d.TenantID, EventID: d.EventID, EventType: d.EventType, EndpointID: d.EndpointID,
		ConfigVersion: d.ConfigVersion, Class: due.ClassRetry, Manual: true, DueAt: l.cfg.Now(),
		PlannedAt: d.PlannedAt, ExpiresAt: d.ExpiresAt, OrderingKey: o.key.OrderingKey,
	}, skipping: o}
	l.flights[d.ID] = f
	l.read(ctx, f)
}

// record appends the flight's OrderingKeySkipped.
func (s *skips) record(ctx actor.Context, f *flight) {
	l, o := s.l, f.skipping
	l.record(ctx, f, &hooklinev1.OrderingKeySkipped{
		TenantId: f.item.TenantID, EndpointId: l.id, DeliveryId: f.item.DeliveryID, EventId: f.item.EventID,
		OrderingKey: o.key.OrderingKey, IssuedBy: o.by, At: timestamppb.New(l.cfg.Now()), RequestId: o.requestID,
	})
}

// recorded answers a skip whose OrderingKeySkipped is durable and lets the
// head go.
func (s *skips) recorded(ctx actor.Context, f *flight, pos events.Position) {
	l, o := s.l, f.skipping
	f.skipping = nil
	v := keyView(o.key, l.cfg.Now())
	v.State = "skipped"
	reply(ctx, o.sender, &internalv1.EndpointReply{OrderingKey: v})
	l.unbusy(f)
	delete(l.flights, f.item.DeliveryID)
	l.settled[f.item.DeliveryID] = pos
	l.pump(ctx)
}

// waitCatchUp keeps a skip that comes before the grain has caught up, and
// reports whether it did: until then the grain has not read which
// deliveries its partition's previous owners may still be attempting
// (handover.awaitPredecessor), so it cannot tell whether the head is one
// of them. startWaiting carries it out once it has.
func (s *skips) waitCatchUp(o *skipOrder, d history.Delivery) bool {
	if s.l.caughtUp {
		return false
	}
	s.l.log.Debug("a skip waits until the endpoint grain has caught up", "delivery_id", d.ID)
	s.waiting = append(s.waiting, laterSkip{o: o, d: d})
	return true
}

// startWaiting carries out the skips that waited for the grain to catch
// up.
func (s *skips) startWaiting(ctx actor.Context) {
	waiting := s.waiting
	s.waiting = nil
	for _, w := range waiting {
		s.start(ctx, w.o, w.d)
	}
}

// refuseWaiting answers the skips still waiting with e: the grain stops,
// or retires.
func (s *skips) refuseWaiting(ctx actor.Context, e *internalv1.GrainError) {
	for _, w := range s.waiting {
		reply(ctx, w.o.sender, &internalv1.EndpointReply{Error: e})
	}
	s.waiting = nil
}
