package cluster

import (
	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// handOver gives the deliveries a publish on this node just planned to the
// endpoint grains active here, on the partitions live here, before the
// projections apply the plan (endpoint.Planned): a tenant's first attempt
// then does not wait for whatever the projections apply ahead of its plan
// (another tenant's burst of thousands of planned deliveries). Grains on
// other nodes, and grains not active, get their work from the due index as
// before: the hand-over is a hint, never a network message, and never
// activates a grain.
func (s *Server) handOver(published *hooklinev1.EventPublished, plan *hooklinev1.DeliveriesPlanned, at events.Position) {
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
