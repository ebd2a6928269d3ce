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
var deliveryTypes = []string{"DeliveriesPlanned", "AttemptSucceeded", "AttemptFailed", "DeliveryExpired", "ReplayRequested"}

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
		d := ds.outcome(a)
		d.attempt(a)
		d.succeeded = true
		if !a.GetManual() {
			d.autoSuccess++
		}
		if d.planned {
			d.status = history.Succeeded
		}
		d.due = false
	case *hooklinev1.AttemptFailed:
		a := m.GetAttempt()
		d := ds.outcome(a)
		d.attempt(a)
		if m.GetNextAttemptAt() != nil {
			if d.planned && d.status != history.Succeeded {
				d.status = history.Pending
			}
			d.due = true
		} else {
			if d.planned && d.status != history.Succeeded {
				d.status = history.Failed
			}
			d.due = false
		}
	case *hooklinev1.DeliveryExpired:
		d := ds.get(m.GetDeliveryId())
		ds.fill(d, m.GetTenantId(), m.GetEventId(), m.GetEndpointId())
		d.outcomes = true
		if m.GetAttempts() != d.recorded && d.expired == "" {
			d.expired = fmt.Sprintf("DeliveryExpired at revision %d counts %d attempts; its stream records %d before it", rec.Revision, m.GetAttempts(), d.recorded)
		}
		if d.planned && d.status != history.Succeeded {
			d.status = history.Failed
		}
		d.due = false
	case *hooklinev1.ReplayRequested:
		d := ds.get(m.GetDeliveryId())
		ds.fill(d, m.GetTenantId(), m.GetEventId(), m.GetEndpointId())
		d.outcomes = true
		d.due = true
	}
}

func (ds *deliveries) outcome(a *hooklinev1.Attempt) *delivery {
	d := ds.get(a.GetDeliveryId())
	ds.fill(d, a.GetTenantId(), a.GetEventId(), a.GetEndpointId())
	d.outcomes = true
	return d
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
