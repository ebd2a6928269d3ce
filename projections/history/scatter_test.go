package history_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/history"
)

// node is one store of a scattered history, serving some partitions.
type node struct {
	h     *history.History
	parts events.PartitionSet
}

// mergedSearch is a cluster's search: every node scans its partitions after
// the cursor's key, and the parts are merged.
func mergedSearch(t *testing.T, nodes []node, q history.Query) history.Page {
	t.Helper()
	after, err := history.CursorKey(q)
	if err != nil {
		t.Fatal(err)
	}
	var parts []history.Partial
	for _, n := range nodes {
		p, err := n.h.Scan(q, after, &n.parts)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, p)
	}
	return history.Merge(q, parts)
}

// continuedSearch is a cluster's search that asks each node for per
// entries at first and continues the parts that stopped too early
// (history.Behind) after their frontiers, for what each may still add
// (history.Room), until the page is full; it returns the page and the
// rounds it took.
func continuedSearch(t *testing.T, nodes []node, q history.Query, per int) (history.Page, int) {
	t.Helper()
	after, err := history.CursorKey(q)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]history.Partial, len(nodes))
	ask := make([]int, len(nodes))
	for i := range ask {
		ask[i] = i
	}
	for round := 1; ; round++ {
		limits := make([]int, len(ask))
		for j, i := range ask {
			limits[j] = per
			if round > 1 {
				limits[j] = history.Room(q, parts, i)
			}
		}
		for j, i := range ask {
			sq, from := q, after
			sq.Limit = limits[j]
			if round > 1 {
				from = parts[i].Frontier
			}
			p, err := nodes[i].h.Scan(sq, from, &nodes[i].parts)
			if err != nil {
				t.Fatal(err)
			}
			parts[i].Continue(p)
		}
		if ask = history.Behind(q, parts); len(ask) == 0 {
			return history.Merge(q, parts), round
		}
		if round > 50 {
			t.Fatal("the parts are never complete")
		}
	}
}

// seedMany plans 40 events over three days to twelve endpoints (four per
// event) with a mix of outcomes.
func seedMany(f *fixture) {
	for i := range 40 {
		typ := []string{"invoice.paid", "order.shipped", "user.disabled"}[i%3]
		var eps []string
		for k := range 4 {
			eps = append(eps, fmt.Sprintf("E%02d", (i+k*3)%12))
		}
		f.publish("acme", fmt.Sprintf("m%02d", i), typ, t0.Add(time.Duration(i)*90*time.Minute), eps...)
		switch i % 4 {
		case 0:
			f.succeed(fmt.Sprintf("m%02d-%s", i, eps[0]), 1)
		case 1:
			f.fail(fmt.Sprintf("m%02d-%s", i, eps[1]), 1, false)
		case 2:
			f.fail(fmt.Sprintf("m%02d-%s", i, eps[2]), 1, true)
		}
	}
}

// TestScatteredSearch: three stores that each serve a third of the
// partitions answer, merged, exactly what one store with everything
// answers: the same pages with the same cursors, and a cursor of either
// continues on the other.
func TestScatteredSearch(t *testing.T) {
	f := newFixture(t)
	seedMany(f)
	whole, _ := f.open(vfs.NewMem(), history.Config{})
	var nodes []node
	for i := range 3 {
		var parts events.PartitionSet
		for p := events.Partition(1); p <= events.Partitions; p++ {
			if int(p)%3 == i {
				parts.Add(p)
			}
		}
		// Each store also holds everything (it applies every partition)
		// but serves only its own: what a node that lost partitions has.
		h, _ := f.open(vfs.NewMem(), history.Config{})
		nodes = append(nodes, node{h: h, parts: parts})
	}
	queries := []history.Query{
		{TenantID: "acme"},
		{TenantID: "acme", Limit: 1},
		{TenantID: "acme", Limit: 7},
		{TenantID: "acme", EndpointID: "E04", Limit: 3},
		{TenantID: "acme", Status: history.Failed, Limit: 2},
		{TenantID: "acme", Status: history.Pending, Limit: 5},
		{TenantID: "acme", EndpointID: "E05", Status: history.Succeeded},
		{TenantID: "acme", EventType: "order.shipped", Limit: 4},
		{TenantID: "acme", EventType: "user.disabled", EndpointID: "E02", Limit: 2},
		{TenantID: "acme", Since: t0.Add(10 * time.Hour), Until: t0.Add(40 * time.Hour), Limit: 6},
		{TenantID: "nobody"},
	}
	for i, q := range queries {
		t.Run(fmt.Sprintf("q%d", i), func(t *testing.T) {
			wq, mq := q, q
			pages := 0
			for {
				want, err := whole.Search(wq)
				if err != nil {
					t.Fatal(err)
				}
				got := mergedSearch(t, nodes, mq)
				if diff := cmp.Diff(ids(want.Deliveries), ids(got.Deliveries)); diff != "" {
					t.Fatalf("page %d (-one store +merged):\n%s", pages, diff)
				}
				if want.Next != got.Next {
					t.Fatalf("page %d: cursor %q from one store, %q merged", pages, want.Next, got.Next)
				}
				if want.Next == "" {
					break
				}
				// Cross over: each continues with the other's cursor.
				wq.Cursor, mq.Cursor = got.Next, want.Next
				if pages++; pages > 200 {
					t.Fatal("search does not end")
				}
			}
		})
	}
	t.Run("tiny scan budget", func(t *testing.T) {
		var small []node
		for _, n := range nodes {
			h, _ := f.open(vfs.NewMem(), history.Config{ScanBudget: 3})
			small = append(small, node{h: h, parts: n.parts})
		}
		for i, q := range queries {
			want := all(t, whole, q)
			var got []string
			for pages := 0; ; pages++ {
				p := mergedSearch(t, small, q)
				got = append(got, ids(p.Deliveries)...)
				if p.Next == "" {
					break
				}
				if pages > 1000 {
					t.Fatalf("q%d: search does not end", i)
				}
				q.Cursor = p.Next
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("q%d (-one store +merged):\n%s", i, diff)
			}
		}
	})
	t.Run("parts asked for less than a page", func(t *testing.T) {
		rounds := 0
		for i, q := range queries {
			wq, mq := q, q
			for pages := 0; ; pages++ {
				want, err := whole.Search(wq)
				if err != nil {
					t.Fatal(err)
				}
				got, r := continuedSearch(t, nodes, mq, 1)
				rounds = max(rounds, r)
				if diff := cmp.Diff(ids(want.Deliveries), ids(got.Deliveries)); diff != "" || want.Next != got.Next {
					t.Fatalf("q%d page %d (-one store +continued):\n%s\ncursors %q, %q", i, pages, diff, want.Next, got.Next)
				}
				if want.Next == "" {
					break
				}
				wq.Cursor, mq.Cursor = got.Next, want.Next
				if pages > 200 {
					t.Fatalf("q%d: search does not end", i)
				}
			}
		}
		// One round of continuations completes a page: each part behind
		// is asked for what it may still add, no more rounds.
		if rounds != 2 {
			t.Errorf("at most %d rounds per page, want 2: the first, then one of continuations", rounds)
		}
	})
	t.Run("overlap counts once", func(t *testing.T) {
		// While a partition moves, two nodes may both answer for it.
		over := append([]node{{h: whole, parts: events.AllPartitions()}}, nodes...)
		q := history.Query{TenantID: "acme", Limit: 9}
		want, _ := whole.Search(q)
		got := mergedSearch(t, over, q)
		if diff := cmp.Diff(ids(want.Deliveries), ids(got.Deliveries)); diff != "" || want.Next != got.Next {
			t.Errorf("(-one store +overlapping):\n%s\ncursors %q, %q", diff, want.Next, got.Next)
		}
	})
}

func ids(ds []history.Delivery) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}

// BenchmarkScanAThird: a member's part of a cluster's page of 1,000 (a
// third of the partitions, its share and a half) from a store that holds
// every partition, as a member that stands by for others does.
func BenchmarkScanAThird(b *testing.B) {
	f := newFixture(b)
	f.publishSpread(1000, 6)
	h, _ := f.open(vfs.NewMem(), history.Config{})
	var third events.PartitionSet
	for p := events.Partition(1); p <= events.Partitions; p += 3 {
		third.Add(p)
	}
	q := history.Query{TenantID: "acme", Status: history.Pending, Limit: 509}
	b.ResetTimer()
	for b.Loop() {
		p, err := h.Scan(q, nil, &third)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Entries) == 0 {
			b.Fatal("nothing found")
		}
	}
}

// BenchmarkSearchPages pages through 20,000 deliveries of a tenant, 1,000
// a page, from a store flushed to its tables (as a node's history is after
// a minute), as a dashboard or a harness counting them would.
func BenchmarkSearchPages(b *testing.B) {
	f := newFixture(b)
	f.publishSpread(4000, 5)
	fs := vfs.NewMem()
	// A first runner applies the log and closes, which flushes the
	// store; the one searched opens it with nothing left to apply.
	r, err := projections.Open(f.log, projections.Config{Dir: "proj", FS: fs, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	r.Own(events.AllPartitions())
	if _, err := history.New(r, history.Config{Logger: quiet, Log: f.log}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	f.sync(r)
	cancel()
	if err := errors.Join(<-done, r.Close()); err != nil && !errors.Is(err, context.Canceled) {
		b.Fatal(err)
	}
	h, _ := f.open(fs, history.Config{})
	b.ResetTimer()
	read, runs := 0, 0
	for b.Loop() {
		runs++
		q := history.Query{TenantID: "acme", Limit: 1000}
		for {
			p, err := h.Search(q)
			if err != nil {
				b.Fatal(err)
			}
			read += len(p.Deliveries)
			if p.Next == "" {
				break
			}
			q.Cursor = p.Next
		}
	}
	if read != runs*20000 {
		b.Fatalf("read %d deliveries in %d runs, want 20,000 a run", read, runs)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(read), "ns/delivery")
}

// publishSpread publishes n events of tenant acme a second apart, each to
// per of 120 endpoints, spread over them.
func (f *fixture) publishSpread(n, per int) {
	for i := range n {
		var eps []string
		for k := range per {
			eps = append(eps, fmt.Sprintf("E%03d", (i*7+k)%120))
		}
		f.publish("acme", fmt.Sprintf("m%05d", i), "invoice.paid", t0.Add(time.Duration(i)*time.Second), eps...)
	}
}
