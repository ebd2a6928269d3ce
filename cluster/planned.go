package cluster

import (
	"fmt"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// handOverActorName names each member's hand-over actor, which receives the
// plans published on other members for its partitions.
const handOverActorName = "hookline-handover"

// handOver gives the deliveries a publish just planned to the endpoint
// grains of their partitions' owners before the projections apply the plan
// (endpoint.Planned): a tenant's first attempt then does not wait for
// whatever the projections apply ahead of its plan (another tenant's burst
// of thousands of planned deliveries), and the owner caches the event, so
// that the first attempt reads nothing from the log. Deliveries of this
// node's partitions go to its grains at once; those of another member's go
// to that member's hand-over actor in one message per member, fire and
// forget. Either way it is a hint: it reaches only grains already active,
// activates none, and a lost one costs only the wait for the due index.
func (s *Server) handOver(published *hooklinev1.EventPublished, plan *hooklinev1.DeliveriesPlanned, at events.Position) {
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
		s.node.system.Root.Send(actor.NewPID(owner, handOverActorName), &controlv1.PlansHandedOver{
			Event: published, Plan: part(plan, ds), Commit: at.Commit, Prepare: at.Prepare,
		})
	}
}

// part is plan with only the deliveries ds.
func part(plan *hooklinev1.DeliveriesPlanned, ds []*hooklinev1.PlannedDelivery) *hooklinev1.DeliveriesPlanned {
	return &hooklinev1.DeliveriesPlanned{
		TenantId: plan.GetTenantId(), EventId: plan.GetEventId(), EventType: plan.GetEventType(),
		Deliveries: ds, At: plan.GetAt(), ExpiresAt: plan.GetExpiresAt(),
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

// handOverActor receives the plans other members published for this
// node's partitions.
type handOverActor struct{ s *Server }

func (a *handOverActor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*controlv1.PlansHandedOver); ok {
		a.s.handOverLocal(m.GetEvent(), m.GetPlan(), events.Position{Commit: m.GetCommit(), Prepare: m.GetPrepare()})
	}
}

func startHandOverActor(s *Server) error {
	if _, err := s.node.system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return &handOverActor{s: s} }), handOverActorName); err != nil {
		return fmt.Errorf("start hand-over actor: %w", err)
	}
	return nil
}
