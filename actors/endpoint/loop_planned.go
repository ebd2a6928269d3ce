package endpoint

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Planned hands an active endpoint grain the deliveries a publish on its
// own node just planned for it, before the projections have applied the
// plan: the grain takes them at once instead of waiting for the due index,
// which applies the log in order and so makes a small tenant's plan wait
// behind another tenant's burst (thousands of planned deliveries ahead of
// it in the log). It is a hint, sent only to a grain already active on the
// node that owns the endpoint's partition (by that node: a publish on
// another member reaches it through the node's hand-over actor, see
// node/planned.go); a lost one costs nothing, since the due index
// offers the same deliveries once it has applied the plan.
//
// The grain takes the deliveries only while the projections have not
// applied the plan yet (Applied before Position): once they have, the due
// index is the truth and its pulls bring them, so a late hint cannot bring
// back a delivery the grain took from the index and settled. A delivery it
// holds or settled already is skipped, as in a pull.
type Planned struct {
	// Event is the published event: the grain's node caches it (even
	// when the grain leaves the deliveries to the due index), so the first
	// attempt reads nothing from the log.
	Event *hooklinev1.EventPublished
	// Items are the deliveries planned for this endpoint (due.PlannedItems).
	Items []due.Item
	// Position is the plan's position in the log (the publish's append).
	Position events.Position
}

// onPlanned takes the deliveries of a Planned hint as flights, as a pull
// would, while the grain has room for them.
func (l *loop) onPlanned(ctx actor.Context, m *Planned) {
	if !l.state.Live() {
		return
	}
	if m.Event != nil && len(m.Items) > 0 && m.Items[0].EndpointID == l.id {
		// Cached whether or not the grain takes the deliveries now: the
		// due index brings those it leaves, and their first attempts then
		// read nothing from the log either.
		l.cfg.events.put(eventStream(m.Items[0]), m.Event)
	}
	if !l.caughtUp || l.paused() || !l.cfg.Projections.Applied().Less(m.Position) {
		return
	}
	taken := 0
	for _, it := range m.Items {
		if it.EndpointID != l.id || it.Ordered() {
			continue // ordered: only the due index knows its turn
		}
		if _, held := l.flights[it.DeliveryID]; held {
			continue
		}
		if _, settled := l.settled[it.DeliveryID]; settled {
			continue
		}
		if !l.lowOnWork() {
			break // the due index offers the rest
		}
		f := &flight{item: it}
		l.flights[it.DeliveryID] = f
		l.read(ctx, f)
		taken++
	}
	if taken > 0 {
		l.pump(ctx)
	}
}
