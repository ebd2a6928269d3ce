package events

import (
	"fmt"
	"math/bits"
	"strings"
)

// Partition numbers the delivery partitions that a cluster shares out: the
// delivery work of an endpoint (its DeliveriesPlanned chunks and the events
// of its delivery streams) belongs to partition [PartitionOf] its id, from 1
// to [Partitions]. The zero Partition, [NoPartition], is that of every other
// record: tenants, endpoints, published events, which every node applies.
//
// The number of partitions is fixed for the life of a log: a record's
// partition is written with it, and the due index and history that a node
// keeps per partition are found by it.
type Partition uint16

const (
	// NoPartition is the partition of records that belong to none.
	NoPartition Partition = 0
	// Partitions is the number of delivery partitions, 1 to Partitions.
	// 256 spreads evenly over clusters of up to a few dozen nodes (each
	// node's share varies by about 1/sqrt(256/nodes)) and keeps the
	// per-partition bookkeeping small.
	Partitions = 256
)

// PartitionOf returns the partition of an endpoint's delivery work: 1 +
// (FNV-1a 64 of the id, mixed) mod Partitions. It never changes.
func PartitionOf(endpointID string) Partition {
	h := uint64(14695981039346656037)
	for i := 0; i < len(endpointID); i++ {
		h ^= uint64(endpointID[i])
		h *= 1099511628211
	}
	return Partition(1 + mix64(h)%Partitions)
}

// mix64 is splitmix64's finalizer: FNV's low bits alone are poorly spread
// for short keys that differ in their last characters.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Valid reports whether p is NoPartition or a delivery partition.
func (p Partition) Valid() bool { return p <= Partitions }

// PartitionSet is a set of partitions, NoPartition included: a filter's set
// holding NoPartition passes the records of no partition. The zero value is
// the empty set; it is a value type, copied on assignment.
type PartitionSet struct {
	w [(Partitions + 1 + 63) / 64]uint64
}

// AllPartitions returns the set of every partition, NoPartition included.
func AllPartitions() PartitionSet {
	var s PartitionSet
	for p := Partition(0); p <= Partitions; p++ {
		s.Add(p)
	}
	return s
}

// NewPartitionSet returns the set of ps.
func NewPartitionSet(ps ...Partition) PartitionSet {
	var s PartitionSet
	for _, p := range ps {
		s.Add(p)
	}
	return s
}

// Add puts p in the set; a partition out of range is ignored.
func (s *PartitionSet) Add(p Partition) {
	if p.Valid() {
		s.w[p/64] |= 1 << (p % 64)
	}
}

// Remove takes p out of the set.
func (s *PartitionSet) Remove(p Partition) {
	if p.Valid() {
		s.w[p/64] &^= 1 << (p % 64)
	}
}

// Has reports whether p is in the set.
func (s PartitionSet) Has(p Partition) bool {
	return p.Valid() && s.w[p/64]&(1<<(p%64)) != 0
}

// Len returns the number of partitions in the set.
func (s PartitionSet) Len() int {
	n := 0
	for _, w := range s.w {
		n += bits.OnesCount64(w)
	}
	return n
}

// IsEmpty reports whether the set holds nothing.
func (s PartitionSet) IsEmpty() bool { return s == PartitionSet{} }

// Union returns the partitions in s or t.
func (s PartitionSet) Union(t PartitionSet) PartitionSet {
	for i := range s.w {
		s.w[i] |= t.w[i]
	}
	return s
}

// Minus returns the partitions in s and not in t.
func (s PartitionSet) Minus(t PartitionSet) PartitionSet {
	for i := range s.w {
		s.w[i] &^= t.w[i]
	}
	return s
}

// Intersect returns the partitions in both s and t.
func (s PartitionSet) Intersect(t PartitionSet) PartitionSet {
	for i := range s.w {
		s.w[i] &= t.w[i]
	}
	return s
}

// Each calls fn for every partition of the set, in increasing order.
func (s PartitionSet) Each(fn func(Partition)) {
	for i, w := range s.w {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			fn(Partition(i*64 + b))
			w &^= 1 << b
		}
	}
}

// Slice returns the partitions of the set, in increasing order.
func (s PartitionSet) Slice() []Partition {
	out := make([]Partition, 0, s.Len())
	s.Each(func(p Partition) { out = append(out, p) })
	return out
}

// Words returns the set as little-endian 64-bit words (bit p of the set is
// bit p%64 of word p/64), for encoding.
func (s PartitionSet) Words() []uint64 { return s.w[:] }

// PartitionSetOfWords is the inverse of [PartitionSet.Words]; extra words
// and bits beyond Partitions are ignored.
func PartitionSetOfWords(words []uint64) PartitionSet {
	var s PartitionSet
	copy(s.w[:], words)
	const tail = Partitions + 1 - 64*(len(s.w)-1) // bits used in the last word
	s.w[len(s.w)-1] &= 1<<tail - 1
	return s
}

// String lists the set compactly, as ranges: "0,1-85,200"; "none" when
// empty.
func (s PartitionSet) String() string {
	var b strings.Builder
	start, prev := -2, -2
	flush := func() {
		if start < 0 {
			return
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		if start == prev {
			fmt.Fprintf(&b, "%d", start)
		} else {
			fmt.Fprintf(&b, "%d-%d", start, prev)
		}
	}
	s.Each(func(p Partition) {
		if int(p) != prev+1 {
			flush()
			start = int(p)
		}
		prev = int(p)
	})
	flush()
	if b.Len() == 0 {
		return "none"
	}
	return b.String()
}
