package node

import (
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// HandOver gives the deliveries a publish just planned to the endpoint
// grains of their partitions' owners before the projections apply the plan
// (endpoint.Planned): a tenant's first attempt then does not wait for
// whatever the projections apply ahead of its plan (another tenant's burst
// of thousands of planned deliveries), and the owner caches the event, so
// that the first attempt reads nothing from the log. Deliveries of this
// node's partitions go to its grains at once; those of another member's go
// to that member's hand-over service in one message per member, fire and
// forget. Either way it is a hint: it reaches only grains already active,
// activates none, and a lost one costs only the wait for the due index.
func (s *Server) HandOver(published *hooklinev1.EventPublished, plan *hooklinev1.DeliveriesPlanned, at events.Position) {
	self := s.node.Address()
	local := false
	remote := map[string][]*hooklinev1.PlannedDelivery{}
	for _, d := range plan.GetDeliveries() {
		switch owner := s.node.PartitionOwner(events.PartitionOf(d.GetEndpointId())); owner {
		case "":
		case self:
			local = true
		default:
			remote[owner] = append(remote[owner], d)
		}
	}
	if local {
		s.handOverLocal(published, plan, at) // it keeps the partitions live here
	}
	for owner, ds := range remote {
		s.node.Send(owner, handOverService, &internalv1.PlansHandedOver{
			Event: published, Plan: part(plan, ds), Commit: at.Commit, Prepare: at.Prepare,
		})
	}
}

// part is plan with only the deliveries ds.
func part(plan *hooklinev1.DeliveriesPlanned, ds []*hooklinev1.PlannedDelivery) *hooklinev1.DeliveriesPlanned {
	return &hooklinev1.DeliveriesPlanned{
		TenantId: plan.GetTenantId(), EventId: plan.GetEventId(), EventType: plan.GetEventType(),
		Deliveries: ds, At: plan.GetAt(), ExpiresAt: plan.GetExpiresAt(), OrderingKey: plan.GetOrderingKey(),
	}
}

// handOverLocal hands the deliveries of the partitions live on this node to
// their endpoint grains active here.
func (s *Server) handOverLocal(published *hooklinev1.EventPublished, plan *hooklinev1.DeliveriesPlanned, at events.Position) {
	live := s.runner.Live()
	byEndpoint := map[string][]due.Item{}
	for _, it := range due.PlannedItems(plan) {
		if !live.Has(events.PartitionOf(it.EndpointID)) || s.cfg.Faults.DropsWake(it.EndpointID) {
			continue
		}
		byEndpoint[it.EndpointID] = append(byEndpoint[it.EndpointID], it)
	}
	for id, items := range byEndpoint {
		s.node.TellLocal(endpoint.Kind, id, &endpoint.Planned{Event: published, Items: items, Position: at})
	}
}

// receiveHandOver hands the plans another member published for this
// node's partitions to the grains active here.
func (s *Server) receiveHandOver(msg proto.Message) {
	if m, ok := msg.(*internalv1.PlansHandedOver); ok {
		s.handOverLocal(m.GetEvent(), m.GetPlan(), events.Position{Commit: m.GetCommit(), Prepare: m.GetPrepare()})
	}
}
