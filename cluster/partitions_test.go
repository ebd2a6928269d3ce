package cluster_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/events"
)

func addrs(n, port int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("10.0.0.%d:%d", i+1, port+i))
	}
	return out
}

// TestRanking: every partition ranks every member; a member that joins
// takes only partitions it now ranks first for; one that leaves hands each
// of its partitions to its first standby and nothing else moves; the
// shares stay near even.
func TestRanking(t *testing.T) {
	for _, n := range []int{1, 2, 3, 5, 10} {
		t.Run(fmt.Sprintf("%d members", n), func(t *testing.T) {
			ms := addrs(n, 7980)
			r := cluster.NewRanking(ms)
			total := 0
			for _, m := range ms {
				c := r.Targeted(m).Len()
				total += c
				if n == 3 && c > events.Partitions*45/100 {
					t.Errorf("member %s is the target of %d partitions, more than 45%%", m, c)
				}
			}
			if total != events.Partitions {
				t.Errorf("targets for %d partitions, want %d", total, events.Partitions)
			}
			for p := events.Partition(1); p <= events.Partitions; p++ {
				if o := r.Order(p); !slices.Equal(slices.Sorted(slices.Values(o)), slices.Sorted(slices.Values(ms))) {
					t.Fatalf("partition %d ranks %v, want every member once", p, o)
				}
			}
			newcomer := addrs(1, 9000)[0]
			joined := cluster.NewRanking(append(slices.Clone(ms), newcomer))
			for p := events.Partition(1); p <= events.Partitions; p++ {
				if before, now := r.Target(p), joined.Target(p); before != now && now != newcomer {
					t.Errorf("partition %d moved from %s to %s, not to the newcomer", p, before, now)
				}
			}
			if got, min := joined.Targeted(newcomer).Len(), events.Partitions/(n+1)*6/10; got < min {
				t.Errorf("the newcomer is the target of %d partitions, want at least %d", got, min)
			}
			if n == 1 {
				return
			}
			left := cluster.NewRanking(ms[1:])
			without := r.Without(ms[0])
			for p := events.Partition(1); p <= events.Partitions; p++ {
				before, now := r.Target(p), left.Target(p)
				switch {
				case before == ms[0] && now != r.Standbys(p, 1)[0]:
					t.Errorf("partition %d of the member that left went to %s, not its standby %s", p, now, r.Standbys(p, 1)[0])
				case before != ms[0] && now != before:
					t.Errorf("partition %d moved from %s to %s when another member left", p, before, now)
				}
				if !slices.Equal(without.Order(p), left.Order(p)) {
					t.Errorf("partition %d: Without ranks %v, a ranking of the rest %v", p, without.Order(p), left.Order(p))
				}
			}
			if got, want := r.Followed(ms[0], 1).Len(), r.Targeted(ms[0]).Len(); got <= want {
				t.Errorf("member follows %d partitions with one standby, want more than the %d it is the target of", got, want)
			}
		})
	}
	t.Run("no member", func(t *testing.T) {
		if o := cluster.NewRanking(nil).Target(1); o != "" {
			t.Errorf("target %q, want none", o)
		}
	})
}
