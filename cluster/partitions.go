package cluster

import (
	"hash/fnv"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hookline/hookline/events"
)

// partitionTable places each delivery partition on one member: of the
// members hosting the partitioned kind, the one whose (address, partition)
// scores highest (rendezvous hashing). A member that joins takes about
// 1/n of the partitions, from every other member alike; one that leaves
// spreads its own over the rest; no other partition moves. Addresses,
// not member ids, are hashed, so a node restarted on the same address gets
// its partitions back and resumes them from its own checkpoints.
//
// The grains of the partitioned kind (endpoints) are placed by their
// partition, on the same member: an endpoint grain pulls its due work from
// the node it runs on. A table is immutable once built.
type partitionTable struct {
	owners [events.Partitions + 1]string // by partition; "" when no member hosts the kind
}

func newPartitionTable(members []*pcluster.Member, kind string) *partitionTable {
	t := &partitionTable{}
	type candidate struct {
		addr string
		seed uint64
	}
	var cs []candidate
	for _, m := range members {
		if m.HasKind(kind) {
			h := fnv.New64a()
			h.Write([]byte(m.Address()))
			cs = append(cs, candidate{addr: m.Address(), seed: h.Sum64()})
		}
	}
	if len(cs) == 0 {
		return t
	}
	for p := events.Partition(1); p <= events.Partitions; p++ {
		var best candidate
		var top uint64
		for i, c := range cs {
			score := mix64(c.seed ^ (uint64(p) * 0x9e3779b97f4a7c15))
			if i == 0 || score > top || (score == top && c.addr < best.addr) {
				best, top = c, score
			}
		}
		t.owners[p] = best.addr
	}
	return t
}

// owner returns the address of the member that owns partition p; "" when
// none hosts the partitioned kind.
func (t *partitionTable) owner(p events.Partition) string {
	if !p.Valid() {
		return ""
	}
	return t.owners[p]
}

// owned returns the partitions of the member at addr.
func (t *partitionTable) owned(addr string) events.PartitionSet {
	var s events.PartitionSet
	for p := events.Partition(1); p <= events.Partitions; p++ {
		if t.owners[p] == addr {
			s.Add(p)
		}
	}
	return s
}

// mix64 is splitmix64's finalizer: it spreads the bits of the seed and the
// partition over the whole score.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
