package cluster

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hookline/hookline/events"
)

// partitionTable places each delivery partition on one member: of the
// members hosting the partitioned kind, the one whose (address, partition)
// scores highest (rendezvous hashing), unless that member already has 10%
// more than its even share (bounded loads; then the next best). A member
// that joins takes about 1/n of the partitions, from every other member
// alike; one that leaves spreads its own over the rest; few others move
// (those the bound pushes to another member). Addresses, not member ids,
// are hashed, so a node restarted on the same address gets its partitions
// back and resumes them from its own checkpoints.
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
		addr  string
		load  int
		score uint64 // for the partition being placed
	}
	var cs []*candidate
	for _, m := range members {
		if m.HasKind(kind) {
			cs = append(cs, &candidate{addr: m.Address()})
		}
	}
	if len(cs) == 0 {
		return t
	}
	// Bounded loads: a member takes at most 10% more than its even share,
	// so that no member ends up with, say, 47% of three members' work
	// (plain rendezvous hashing's partition counts vary binomially). A
	// partition whose best member is full goes to the next best.
	limit := (events.Partitions*11 + 10*len(cs) - 1) / (10 * len(cs))
	ranked := make([]*candidate, len(cs))
	for p := events.Partition(1); p <= events.Partitions; p++ {
		for _, c := range cs {
			sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s", p, c.addr))
			c.score = binary.BigEndian.Uint64(sum[:8])
		}
		copy(ranked, cs)
		slices.SortFunc(ranked, func(a, b *candidate) int {
			if a.score != b.score {
				return cmp.Compare(b.score, a.score) // highest first
			}
			return cmp.Compare(a.addr, b.addr)
		})
		for _, c := range ranked {
			if c.load < limit {
				c.load++
				t.owners[p] = c.addr
				break
			}
		}
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
