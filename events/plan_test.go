package events_test

import (
	"fmt"
	"testing"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

func TestChunkPlan(t *testing.T) {
	if got := events.ChunkPlan(nil, nil); len(got) != 0 {
		t.Fatalf("an empty plan gave %d chunks", len(got))
	}
	// Two endpoints of one partition with more deliveries than a chunk
	// holds, plus filtered endpoints of another partition.
	var planned []*hooklinev1.PlannedDelivery
	for i := range events.PlannedPerChunk + 10 {
		planned = append(planned, &hooklinev1.PlannedDelivery{DeliveryId: fmt.Sprint("d", i), EndpointId: "ep_a"})
	}
	other := "ep_b"
	for events.PartitionOf(other) == events.PartitionOf("ep_a") {
		other += "x"
	}
	filtered := []*hooklinev1.FilteredEndpoint{{EndpointId: other}}
	chunks := events.ChunkPlan(planned, filtered)
	if len(chunks) != 3 {
		t.Fatalf("got %d chunks, want 3 (two for ep_a's partition, one for %s's)", len(chunks), other)
	}
	total := 0
	for i, c := range chunks {
		if n := len(c.Deliveries) + len(c.Filtered); n > events.PlannedPerChunk {
			t.Errorf("chunk %d holds %d entries, more than %d", i, n, events.PlannedPerChunk)
		}
		if i > 0 && c.Partition < chunks[i-1].Partition {
			t.Errorf("chunk %d of partition %d after partition %d: want partition order", i, c.Partition, chunks[i-1].Partition)
		}
		for _, d := range c.Deliveries {
			if events.PartitionOf(d.GetEndpointId()) != c.Partition {
				t.Errorf("delivery of %s in a chunk of partition %d", d.GetEndpointId(), c.Partition)
			}
		}
		total += len(c.Deliveries)
	}
	if total != len(planned) {
		t.Errorf("chunks hold %d deliveries, want %d", total, len(planned))
	}
}
