package events_test

import (
	"fmt"
	"testing"

	"github.com/hookline/hookline/events"
)

func TestPartitionOf(t *testing.T) {
	counts := make([]int, events.Partitions+1)
	const n = 100_000
	for i := range n {
		p := events.PartitionOf(fmt.Sprintf("ep_%d", i))
		if p < 1 || p > events.Partitions {
			t.Fatalf("PartitionOf(ep_%d) = %d, want 1..%d", i, p, events.Partitions)
		}
		counts[p]++
	}
	if got := events.PartitionOf("ep_42"); got != events.PartitionOf("ep_42") {
		t.Fatalf("PartitionOf is not deterministic")
	}
	// Each partition should get n/Partitions ± a few standard deviations.
	mean := float64(n) / events.Partitions
	for p := 1; p <= events.Partitions; p++ {
		if d := float64(counts[p]) - mean; d > 6*20 || d < -6*20 { // sd ≈ sqrt(390) ≈ 20
			t.Errorf("partition %d got %d of %d ids, want about %.0f", p, counts[p], n, mean)
		}
	}
}

func TestPartitionSet(t *testing.T) {
	s := events.NewPartitionSet(0, 1, 2, 3, 100, events.Partitions)
	if !s.Has(0) || !s.Has(events.Partitions) || s.Has(4) || s.Has(events.Partitions+1) {
		t.Errorf("Has is wrong for %s", s)
	}
	if got, want := s.String(), "0-3,100,256"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if s.Len() != 6 {
		t.Errorf("Len() = %d, want 6", s.Len())
	}
	t2 := events.NewPartitionSet(3, 4)
	if got := s.Minus(t2).Union(events.NewPartitionSet(7)).String(); got != "0-2,7,100,256" {
		t.Errorf("minus and union: %s", got)
	}
	if got := s.Intersect(t2).String(); got != "3" {
		t.Errorf("intersect: %s", got)
	}
	if back := events.PartitionSetOfWords(s.Words()); back != s {
		t.Errorf("words round trip: %s, want %s", back, s)
	}
	all := events.AllPartitions()
	if all.Len() != events.Partitions+1 {
		t.Errorf("AllPartitions has %d, want %d", all.Len(), events.Partitions+1)
	}
	words := all.Words()
	words = append(words, ^uint64(0))
	for i := range words {
		words[i] = ^uint64(0)
	}
	if got := events.PartitionSetOfWords(words); got != all {
		t.Errorf("stray bits kept: %s", got)
	}
	var empty events.PartitionSet
	if !empty.IsEmpty() || empty.String() != "none" || all.Minus(all) != empty {
		t.Errorf("empty set")
	}
}
