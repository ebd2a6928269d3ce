package cluster

import (
	"fmt"
	"testing"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hookline/hookline/events"
)

func members(n, port int) []*pcluster.Member {
	var ms []*pcluster.Member
	for i := range n {
		ms = append(ms, &pcluster.Member{Host: fmt.Sprintf("10.0.0.%d", i+1), Port: int32(port + i), Id: fmt.Sprint(i), Kinds: []string{"endpoint"}})
	}
	return ms
}

// TestPartitionTable: every partition has one owner among the members
// hosting the kind; no member has more than 10% over its even share; a
// member that joins takes its share from the others and few partitions
// move between two others; one that leaves gives its own away and few
// others move.
func TestPartitionTable(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 10} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			ms := members(n, 7980)
			tab := newPartitionTable(ms, "endpoint")
			total := 0
			for _, m := range ms {
				c := tab.owned(m.Address()).Len()
				total += c
				if limit := (events.Partitions*11 + 10*n - 1) / (10 * n); c > limit {
					t.Errorf("member %s owns %d partitions, more than %d", m.Address(), c, limit)
				}
			}
			if total != events.Partitions {
				t.Errorf("owners for %d partitions, want %d", total, events.Partitions)
			}
			// Join: only partitions that go to the newcomer move.
			joined := append(ms, members(1, 9000)...)
			after := newPartitionTable(joined, "endpoint")
			newcomer := joined[len(joined)-1].Address()
			side := 0 // moves between members that were there before
			for p := events.Partition(1); p <= events.Partitions; p++ {
				if before, now := tab.owner(p), after.owner(p); before != now && now != newcomer {
					side++
				}
			}
			if side > events.Partitions/10 {
				t.Errorf("%d partitions moved between old members on a join", side)
			}
			if got, min := after.owned(newcomer).Len(), events.Partitions/(n+1)*8/10; got < min {
				t.Errorf("the newcomer took %d partitions, want at least %d", got, min)
			}
			// Leave (of the first): few partitions but its own move.
			if n > 1 {
				left := newPartitionTable(ms[1:], "endpoint")
				side = 0
				for p := events.Partition(1); p <= events.Partitions; p++ {
					if before, now := tab.owner(p), left.owner(p); before != now && before != ms[0].Address() {
						side++
					}
				}
				if side > events.Partitions/10 {
					t.Errorf("%d partitions moved between remaining members when one left", side)
				}
			}
		})
	}
	t.Run("no member hosts the kind", func(t *testing.T) {
		tab := newPartitionTable(members(3, 7980), "other")
		if o := tab.owner(1); o != "" {
			t.Errorf("owner %q, want none", o)
		}
	})
}
