package reconcile

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// deliveryTypes are the records of a delivery's life.
var deliveryTypes = []string{"DeliveriesPlanned", "AttemptSucceeded", "AttemptFailed", "DeliveryExpired", "ReplayRequested", "OrderingKeySkipped"}

// delivery is one delivery as the log has it up to the head: what the
// projections should show of it, folded by the same rules as theirs (see
// projections/due and projections/history), and what the log says of its
// attempts.
type delivery struct {
	id, tenant, event, endpoint string
	planned                     bool
	plannedAt                   time.Time
	// status is the history's view (0 when never planned).
	status history.Status
	// due is whether the due index should hold it.
	due bool
	// histAttempts counts attempts since its (last) plan, as the history
	// does; recorded counts every attempt of its stream.
	histAttempts int32
	recorded     int32
	succeeded    bool // some AttemptSucceeded
	autoSuccess  int32
	outcomes     bool
	// anomalies the log holds (attempt numbering, an expiry's count).
	numbering string
	expired   string
}

// deliveries folds the records of delivery streams and plans.
type deliveries struct {
	parts events.PartitionSet
	byID  map[string]*delivery
}

func newDeliveries(parts events.PartitionSet) *deliveries {
	return &deliveries{parts: parts, byID: map[string]*delivery{}}
}

func (ds *deliveries) get(id string) *delivery {
	d, ok := ds.byID[id]
	if !ok {
		d = &delivery{id: id}
		ds.byID[id] = d
	}
	return d
}

// apply folds one record.
func (ds *deliveries) apply(rec *events.Record, msg proto.Message) {
	switch m := msg.(type) {
	case *hooklinev1.DeliveriesPlanned:
		for _, p := range m.GetDeliveries() {
			if !ds.parts.Has(events.PartitionOf(p.GetEndpointId())) {
				continue
			}
			d := ds.get(p.GetDeliveryId())
			d.tenant, d.event, d.endpoint = m.GetTenantId(), m.GetEventId(), p.GetEndpointId()
			// A plan replaces what the projections held of the delivery.
			d.planned, d.plannedAt, d.status, d.due, d.histAttempts = true, asTime(m.GetAt()), history.Pending, true, 0
		}
	case *hooklinev1.AttemptSucceeded:
		a := m.GetAttempt()
		d := ds.outcome(a.GetDeliveryId(), a.GetTenantId(), a.GetEventId(), a.GetEndpointId())
		d.attempt(a)
		d.succeeded = true
		if !a.GetManual() {
			d.autoSuccess++
		}
		d.settle(history.Succeeded, false)
	case *hooklinev1.AttemptFailed:
		a := m.GetAttempt()
		d := ds.outcome(a.GetDeliveryId(), a.GetTenantId(), a.GetEventId(), a.GetEndpointId())
		d.attempt(a)
		if m.GetNextAttemptAt() != nil {
			d.settle(history.Pending, true)
		} else {
			d.settle(history.Failed, false)
		}
	case *hooklinev1.DeliveryExpired:
		d := ds.outcome(m.GetDeliveryId(), m.GetTenantId(), m.GetEventId(), m.GetEndpointId())
		if m.GetAttempts() != d.recorded && d.expired == "" {
			d.expired = fmt.Sprintf("DeliveryExpired at revision %d counts %d attempts; its stream records %d before it", rec.Revision, m.GetAttempts(), d.recorded)
		}
		d.settle(history.Failed, false)
	case *hooklinev1.ReplayRequested:
		d := ds.outcome(m.GetDeliveryId(), m.GetTenantId(), m.GetEventId(), m.GetEndpointId())
		d.due = true
	case *hooklinev1.OrderingKeySkipped:
		// A pending head ends failed; a parked one had ended.
		d := ds.outcome(m.GetDeliveryId(), m.GetTenantId(), m.GetEventId(), m.GetEndpointId())
		d.settle(history.Failed, false)
	}
}

// outcome returns the delivery that an outcome's record is about, named
// from the record if its plan was not seen.
func (ds *deliveries) outcome(id, tenant, event, endpoint string) *delivery {
	d := ds.get(id)
	ds.fill(d, tenant, event, endpoint)
	d.outcomes = true
	return d
}

// settle sets whether d is due and, unless it succeeded, the status the
// log gives a planned delivery (a success is final).
func (d *delivery) settle(status history.Status, due bool) {
	if d.planned && d.status != history.Succeeded {
		d.status = status
	}
	d.due = due
}

// fill names a delivery known from its stream only so far.
func (ds *deliveries) fill(d *delivery, tenant, event, endpoint string) {
	if d.tenant == "" {
		d.tenant, d.event, d.endpoint = tenant, event, endpoint
	}
}

// attempt counts one attempt and checks its number: the k-th attempt of a
// stream is number k (an attempt cut short before it was recorded is
// attempted again under the same number).
func (d *delivery) attempt(a *hooklinev1.Attempt) {
	d.recorded++
	if d.planned {
		d.histAttempts++
	}
	if a.GetNumber() != d.recorded && d.numbering == "" {
		d.numbering = fmt.Sprintf("attempt %d of its stream is numbered %d", d.recorded, a.GetNumber())
	}
}

// pending reports whether the log leaves d neither succeeded nor failed.
func (d *delivery) pending() bool { return d.status == history.Pending }
