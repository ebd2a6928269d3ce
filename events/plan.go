package events

import (
	"maps"
	"slices"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// PlannedPerChunk bounds the entries (deliveries and filtered endpoints)
// of one DeliveriesPlanned event, so that a large fan-out stays under a
// log's event size cap.
const PlannedPerChunk = 2000

// PlanChunk is what one DeliveriesPlanned event of a plan carries: planned
// deliveries and filtered endpoints of one partition.
type PlanChunk struct {
	Partition  Partition
	Deliveries []*hooklinev1.PlannedDelivery
	Filtered   []*hooklinev1.FilteredEndpoint
}

// ChunkPlan splits a plan by delivery partition, in partition order, and
// each partition's part into chunks of at most PlannedPerChunk entries, so
// that each node reads the plans of its own partitions only. An empty plan
// gives no chunk.
func ChunkPlan(planned []*hooklinev1.PlannedDelivery, filtered []*hooklinev1.FilteredEndpoint) []PlanChunk {
	byPart := map[Partition]*PlanChunk{}
	get := func(p Partition) *PlanChunk {
		if byPart[p] == nil {
			byPart[p] = &PlanChunk{Partition: p}
		}
		return byPart[p]
	}
	for _, d := range planned {
		c := get(PartitionOf(d.GetEndpointId()))
		c.Deliveries = append(c.Deliveries, d)
	}
	for _, f := range filtered {
		c := get(PartitionOf(f.GetEndpointId()))
		c.Filtered = append(c.Filtered, f)
	}
	var chunks []PlanChunk
	for _, p := range slices.Sorted(maps.Keys(byPart)) {
		ds, fs := byPart[p].Deliveries, byPart[p].Filtered
		for len(ds) > 0 || len(fs) > 0 {
			c := PlanChunk{Partition: p}
			n := min(len(ds), PlannedPerChunk)
			c.Deliveries, ds = ds[:n], ds[n:]
			m := min(len(fs), PlannedPerChunk-n)
			c.Filtered, fs = fs[:m], fs[m:]
			chunks = append(chunks, c)
		}
	}
	return chunks
}
