package node

import (
	"time"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/owners"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// The attempts a partition's moves pass on (ADR 0063, ADR 0067): a
// hand-over lists the attempts its owner still runs and those it holds for
// its own predecessors, a takeover from a member that died those that
// member held; the new owner's endpoint grains hold their deliveries until
// their outcomes are applied or their time is out.

// stillRunning is the endpoint grains' Config.StillRunning: the attempts
// of endpointID that the record which gave its partition to this node
// lists as still running elsewhere (none when the partition came
// otherwise, or this node does not serve it): a hand-over lists those its
// owner ran and those it held for its own predecessors, a takeover those
// the member that died held (passOn).
func (m *partitions) stillRunning(endpointID string) []endpoint.Running {
	n, p := m.node.Load(), events.PartitionOf(endpointID)
	if n == nil || !m.claims(p) {
		return nil
	}
	o := m.owners.Table().Owners[p]
	moved := o.Reason == hooklinev1.PartitionsAssigned_REASON_HANDOVER || o.Reason == hooklinev1.PartitionsAssigned_REASON_FAILOVER
	if !moved || o.Address != n.Address() {
		return nil
	}
	var out []endpoint.Running
	for _, r := range o.Running {
		if r.EndpointID == endpointID {
			out = append(out, endpoint.Running{EndpointID: r.EndpointID, DeliveryID: r.DeliveryID, Attempt: r.Attempt, Until: r.Until})
		}
	}
	return out
}

// passOn returns running, the attempts a change of partitions ps lists, with
// those that t lists for ps as running on an earlier owner and whose time is
// not out at now: the member that serves a partition holds their deliveries
// for that owner (ADR 0063), and whoever serves it next must hold them too,
// else a third owner attempts while the first still sends (ADR 0067). A
// delivery listed twice is listed once, with its latest attempt.
func passOn(t *owners.Table, ps []events.Partition, running []endpoint.Running, now time.Time) []endpoint.Running {
	for _, p := range ps {
		for _, r := range t.Owners[p].Running {
			if now.Before(r.Until) {
				running = append(running, endpoint.Running{EndpointID: r.EndpointID, DeliveryID: r.DeliveryID, Attempt: r.Attempt, Until: r.Until})
			}
		}
	}
	byDelivery := map[string]endpoint.Running{}
	var out []endpoint.Running
	for _, r := range running {
		prev, seen := byDelivery[r.DeliveryID]
		switch {
		case !seen:
			out = append(out, r)
		case r.Attempt < prev.Attempt || r.Attempt == prev.Attempt && !r.Until.After(prev.Until):
			continue
		}
		byDelivery[r.DeliveryID] = r
	}
	for i, r := range out {
		out[i] = byDelivery[r.DeliveryID]
	}
	return out
}
