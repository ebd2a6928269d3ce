package endpoint

import (
	"context"
	"errors"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// partition is the delivery partition of the grain's endpoint: that of
// every event it appends to its deliveries' streams.
func (g *grain) partition() events.Partition { return events.PartitionOf(g.id) }

// recorded is the result of an append to a delivery stream.
type recorded struct {
	id   string
	msgs []proto.Message
	res  events.AppendResult
	err  error
}

// record appends msgs to the flight's delivery stream, off the mailbox,
// with the revision the flight holds as the expected one.
func (g *grain) record(ctx actor.Context, f *flight, msgs ...proto.Message) {
	f.stage = stageRecording
	stream := events.DeliveryStream(f.item.DeliveryID)
	evs := make([]events.Event, len(msgs))
	for i, m := range msgs {
		rev := events.Revision(i)
		if f.d.exists {
			rev = f.d.rev + 1 + events.Revision(i)
		}
		ev, err := encodeDelivery(g.eng.incarnation, stream, g.partition(), rev, m)
		if err != nil {
			g.log.Error("endpoint grain cannot encode a delivery event", "delivery_id", f.item.DeliveryID, "err", err)
			g.drop(ctx, f)
			return
		}
		evs[i] = ev
	}
	log, id, expected := g.cfg.Log, f.item.DeliveryID, events.ExpectAfter(f.d.rev, f.d.exists)
	g.async(ctx, g.cfg.IOTimeout, func(c context.Context) any {
		res, err := log.Append(c, stream, expected, evs...)
		return &recorded{id: id, msgs: msgs, res: res, err: err}
	})
}

func (g *grain) onRecorded(ctx actor.Context, m *recorded) {
	e := g.eng
	f := e.flights[m.id]
	if f == nil {
		return
	}
	switch {
	case m.err == nil:
	case errors.Is(m.err, events.ErrWrongRevision):
		g.log.Warn("endpoint grain lost ownership of a delivery stream; stopping", "delivery_id", m.id, "revision", uint64(f.d.rev), "err", m.err)
		g.lostOwnership()
		g.stop(ctx, controlv1.GrainError_CODE_ABORTED, "another activation of the endpoint grain owns its deliveries now; retry")
		return
	default:
		// It may or may not have landed: stop, and let the next activation
		// read the truth.
		g.log.Error("endpoint grain cannot record a delivery event; stopping", "delivery_id", m.id, "err", m.err)
		g.stop(ctx, controlv1.GrainError_CODE_UNAVAILABLE, "the endpoint grain stopped; retry")
		return
	}
	f.d.rev, f.d.exists = m.res.Revision, true
	if e.written.Less(m.res.Position) {
		e.written = m.res.Position
	}
	replayOf := f.d.replay
	for _, msg := range m.msgs {
		f.d.apply(msg)
	}
	if _, ok := m.msgs[0].(*hooklinev1.ReplayRequested); ok {
		g.replayed(ctx, f)
		return
	}
	// An outcome: the flight is settled.
	if replayOf != nil {
		g.recoveryProgress(ctx, replayOf.GetRecoveryId(), true)
	}
	if len(f.replays) > 0 {
		g.appendReplay(ctx, f)
		return
	}
	delete(e.flights, m.id)
	e.wantPull = true
	g.pump(ctx)
}

// drop lets go of a flight without an outcome: it stays due, or it had
// ended. Replays waiting on it are answered, as for a replay that could
// not start.
func (g *grain) drop(ctx actor.Context, f *flight) {
	delete(g.eng.flights, f.item.DeliveryID)
	for _, o := range f.replays {
		g.abandon(ctx, o, controlv1.GrainError_CODE_UNAVAILABLE, "the delivery could not be read; retry")
	}
	f.replays = nil
}
