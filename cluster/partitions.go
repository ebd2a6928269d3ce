package cluster

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/hookline/hookline/events"
)

// Ranking orders, for each delivery partition, the members hosting the
// partitioned kind by rendezvous score of (partition, address), highest
// first. The first member is the partition's target owner, the next ones
// its standbys, in order. So a member that joins becomes the target of
// about 1/n of the partitions, taken from every member alike; one that
// leaves hands each of its partitions to the member ranked next, its first
// standby; no other partition changes target. Addresses, not member ids,
// are hashed: a node restarted on the same address ranks as before.
//
// Plain rendezvous hashing balances 256 partitions over three members
// within a few points of even (about 36 % for the largest in the median
// case, 43 % at worst); a bound on loads would move partitions between
// members that did not change. A Ranking is immutable; the zero value
// ranks no member.
type Ranking struct {
	order [events.Partitions + 1][]string // by partition; nil for NoPartition
}

// NewRanking ranks addrs for every partition.
func NewRanking(addrs []string) *Ranking {
	r := &Ranking{}
	if len(addrs) == 0 {
		return r
	}
	type scored struct {
		addr  string
		score uint64
	}
	cs := make([]scored, len(addrs))
	for p := events.Partition(1); p <= events.Partitions; p++ {
		for i, a := range addrs {
			sum := sha256.Sum256(fmt.Appendf(nil, "%d/%s", p, a))
			cs[i] = scored{addr: a, score: binary.BigEndian.Uint64(sum[:8])}
		}
		slices.SortFunc(cs, func(a, b scored) int {
			if a.score != b.score {
				return cmp.Compare(b.score, a.score) // highest first
			}
			return cmp.Compare(a.addr, b.addr)
		})
		order := make([]string, len(cs))
		for i, c := range cs {
			order[i] = c.addr
		}
		r.order[p] = order
	}
	return r
}

// Target returns the member partition p belongs to: the first ranked; ""
// when no member hosts the partitioned kind or p is not a partition.
func (r *Ranking) Target(p events.Partition) string {
	if o := r.Order(p); len(o) > 0 {
		return o[0]
	}
	return ""
}

// Standbys returns the k members ranked after p's target (fewer when
// fewer members host the kind).
func (r *Ranking) Standbys(p events.Partition, k int) []string {
	o := r.Order(p)
	if len(o) <= 1 || k <= 0 {
		return nil
	}
	return o[1:min(len(o), 1+k)]
}

// Order returns every member hosting the kind, best ranked first, for p.
// The caller must not change it.
func (r *Ranking) Order(p events.Partition) []string {
	if r == nil || !p.Valid() {
		return nil
	}
	return r.order[p]
}

// Targeted returns the partitions whose target is addr.
func (r *Ranking) Targeted(addr string) events.PartitionSet {
	var s events.PartitionSet
	for p := events.Partition(1); p <= events.Partitions; p++ {
		if r.Target(p) == addr {
			s.Add(p)
		}
	}
	return s
}

// Followed returns the partitions addr is the target or one of the k
// standbys of: those whose records it applies.
func (r *Ranking) Followed(addr string, k int) events.PartitionSet {
	var s events.PartitionSet
	for p := events.Partition(1); p <= events.Partitions; p++ {
		if o := r.Order(p); slices.Contains(o[:min(len(o), 1+max(k, 0))], addr) {
			s.Add(p)
		}
	}
	return s
}

// Without returns the ranking of the same members but addr.
func (r *Ranking) Without(addr string) *Ranking {
	out := &Ranking{}
	for p := events.Partition(1); p <= events.Partitions; p++ {
		out.order[p] = slices.DeleteFunc(slices.Clone(r.Order(p)), func(a string) bool { return a == addr })
	}
	return out
}
