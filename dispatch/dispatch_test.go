package dispatch_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/projections/due"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// clock is an injected clock.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// ask is one Acquire: tenant/endpoint and class.
type ask struct {
	tenant, endpoint string
	class            due.Class
}

// grants records which asks were granted, in order.
type grants struct {
	mu  sync.Mutex // guards got
	got []string
}

func (g *grants) add(s string) { g.mu.Lock(); g.got = append(g.got, s); g.mu.Unlock() }
func (g *grants) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.got
	g.got = nil
	return out
}

func (a ask) String() string {
	c := "n"
	if a.class == due.ClassRetry {
		c = "r"
	}
	return a.tenant + "/" + a.endpoint + "/" + c
}

func repeat(n int, a ask) []ask {
	out := make([]ask, n)
	for i := range out {
		out[i] = a
	}
	return out
}

func interleave(lists ...[]ask) []ask {
	var out []ask
	for i := 0; ; i++ {
		added := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// TestDispatch fills the node's one slot with a blocker, queues asks, moves
// the clock, then frees the slot grants times in a row (each grant given
// back at once) and checks the order of the grants.
func TestDispatch(t *testing.T) {
	a1n := ask{"a", "a1", due.ClassNew}
	a2n := ask{"a", "a2", due.ClassNew}
	a1r := ask{"a", "a1", due.ClassRetry}
	bn := ask{"b", "b1", due.ClassNew}
	br := ask{"b", "b1", due.ClassRetry}
	tests := []struct {
		name    string
		weights map[string]int
		asks    []ask
		elapsed time.Duration // between the asks and the grants
		grants  int
		want    []ask
	}{{
		name:   "equal weights alternate tenants",
		asks:   interleave(repeat(4, a1n), repeat(4, bn)),
		grants: 6,
		want:   []ask{a1n, bn, a1n, bn, a1n, bn},
	}, {
		name:    "weights 1:3 share 1:3, whatever the order of asking",
		weights: map[string]int{"b": 3},
		asks:    append(repeat(10, a1n), repeat(10, bn)...),
		grants:  8,
		want:    []ask{a1n, bn, bn, bn, a1n, bn, bn, bn},
	}, {
		name:   "a tenant's endpoints take turns",
		asks:   append(repeat(3, a1n), repeat(3, a2n)...),
		grants: 4,
		want:   []ask{a1n, a2n, a1n, a2n},
	}, {
		name:    "late new work takes every slot ahead of retries",
		asks:    append(repeat(3, a1r), repeat(2, bn)...),
		elapsed: 2 * time.Second,
		grants:  4,
		want:    []ask{bn, bn, a1r, a1r},
	}, {
		name:    "retries borrow slots while new work is inside its objective",
		asks:    append(repeat(3, a1r), repeat(2, bn)...),
		elapsed: 100 * time.Millisecond,
		grants:  4,
		want:    []ask{a1r, bn, a1r, bn},
	}, {
		name:   "within an endpoint new comes before retries",
		asks:   []ask{a1r, a1r, a1n},
		grants: 3,
		want:   []ask{a1n, a1r, a1r},
	}, {
		name:   "retries run when no new work waits",
		asks:   []ask{br, a1r, br},
		grants: 3,
		want:   []ask{br, a1r, br},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{now: t0}
			d := dispatch.New(dispatch.Config{Slots: 1, Now: clk.Now, Weight: func(id string) int { return tt.weights[id] }})
			g := &grants{}
			d.Acquire("blocker", "x", due.ClassNew, func() { g.add("blocker") })
			if got := g.take(); len(got) != 1 {
				t.Fatalf("blocker: grants %v", got)
			}
			for _, a := range tt.asks {
				d.Acquire(a.tenant, a.endpoint, a.class, func() { g.add(a.String()) })
			}
			clk.Add(tt.elapsed)
			var got []string
			holder := ask{"blocker", "x", 0}
			for range tt.grants {
				d.Release(holder.tenant, holder.endpoint, dispatch.Answered)
				step := g.take()
				if len(step) != 1 {
					t.Fatalf("after %v: grants %v, want one", got, step)
				}
				got = append(got, step[0])
				parts := strings.Split(step[0], "/")
				holder = ask{tenant: parts[0], endpoint: parts[1]}
			}
			want := make([]string, len(tt.want))
			for i, a := range tt.want {
				want[i] = a.String()
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("grant order (-want +got):\n%s", diff)
			}
		})
	}
}

// TestDispatchShares checks the long-run split of slots between weighted
// tenants that always have work waiting.
func TestDispatchShares(t *testing.T) {
	for _, w := range [][3]int{{1, 1, 1}, {1, 2, 4}, {5, 1, 1}} {
		t.Run(fmt.Sprint(w), func(t *testing.T) {
			weights := map[string]int{"a": w[0], "b": w[1], "c": w[2]}
			d := dispatch.New(dispatch.Config{Slots: 1, Weight: func(id string) int { return weights[id] }})
			counts := map[string]int{}
			var mu sync.Mutex
			var last string
			var ask func(tenant string)
			ask = func(tenant string) {
				d.Acquire(tenant, tenant+"1", due.ClassNew, func() {
					mu.Lock()
					counts[tenant]++
					last = tenant
					mu.Unlock()
				})
			}
			for _, tn := range []string{"a", "b", "c"} {
				for range 3 {
					ask(tn)
				}
			}
			total := 0
			for _, x := range w {
				total += x
			}
			rounds := 100 * total
			for range rounds {
				mu.Lock()
				holder := last
				mu.Unlock()
				ask(holder) // keep every tenant busy
				d.Release(holder, holder+"1", dispatch.Answered)
			}
			for i, tn := range []string{"a", "b", "c"} {
				want := 100 * w[i]
				if got := counts[tn]; got < want-2 || got > want+2 {
					t.Errorf("tenant %s (weight %d): %d grants of %d, want about %d", tn, w[i], got, rounds, want)
				}
			}
		})
	}
}

func TestDispatchTenantCapAndLeave(t *testing.T) {
	d := dispatch.New(dispatch.Config{Slots: 4, TenantCap: 3})
	g := &grants{}
	for range 4 {
		d.Acquire("hang", "h1", due.ClassNew, func() { g.add("hang") })
	}
	if got := g.take(); len(got) != 3 {
		t.Fatalf("a tenant got %d slots, want its cap 3", len(got))
	}
	d.Acquire("ok", "o1", due.ClassNew, func() { g.add("ok") })
	if got := g.take(); !cmp.Equal(got, []string{"ok"}) {
		t.Fatalf("another tenant's first ask: grants %v, want [ok] at once", got)
	}
	// The hanging endpoint stops: its three slots come back and its
	// waiting ask is dropped.
	d.Leave("hang", "h1")
	if s := d.Stats(); s.Used != 1 || s.Waiting != [2]int{} {
		t.Fatalf("after leave: %+v, want 1 used (ok), none waiting", s)
	}
	if got := g.take(); len(got) != 0 {
		t.Fatalf("grants after leave: %v, want none", got)
	}
	d.Release("ok", "o1", dispatch.Answered)
	d.Release("ok", "o1", dispatch.Answered) // a release of a slot not held changes nothing
	if s := d.Stats(); s.Used != 0 {
		t.Fatalf("after releases: %+v", s)
	}
}

func TestDispatchConcurrent(t *testing.T) {
	d := dispatch.New(dispatch.Config{Slots: 8})
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			tn, ep := fmt.Sprint("t", i%4), fmt.Sprint("e", i)
			for range 200 {
				ch := make(chan struct{}, 1)
				d.Acquire(tn, ep, due.Class(i%2), func() { ch <- struct{}{} })
				<-ch
				d.Release(tn, ep, dispatch.Answered)
			}
		})
	}
	wg.Wait()
	if s := d.Stats(); s.Used != 0 || s.Waiting != [2]int{} {
		t.Fatalf("after all: %+v", s)
	}
}

// TestDispatchPromote: while grantable new work waits past the objective,
// a freed slot goes to it and not to a retry; a promoted retry request is
// served as new work, with its grant, in its turn.
func TestDispatchPromote(t *testing.T) {
	clk := &clock{now: t0}
	d := dispatch.New(dispatch.Config{Slots: 2, TenantCap: 2, Now: clk.Now})
	g := &grants{}
	for range 2 {
		d.Acquire("busy", "b1", due.ClassNew, func() { g.add("busy") })
	}
	d.Acquire("acme", "a1", due.ClassRetry, func() { g.add("acme retry") })
	d.Acquire("acme", "a1", due.ClassRetry, func() { g.add("acme retry") })
	d.Acquire("late", "l1", due.ClassNew, func() { g.add("late") })
	clk.Add(2 * time.Second)       // late's new work is late now
	d.Promote("acme", "nobody", 1) // another endpoint: nothing
	if got := g.take(); !cmp.Equal(got, []string{"busy", "busy"}) {
		t.Fatalf("grants %v, want busy's two only", got)
	}
	d.Promote("acme", "a1", 1)
	d.Release("busy", "b1", dispatch.Answered)
	if got := g.take(); !cmp.Equal(got, []string{"acme retry"}) {
		t.Fatalf("grants %v after the promotion, want acme's promoted request (new work, first in the round)", got)
	}
	d.Release("busy", "b1", dispatch.Answered)
	if got := g.take(); !cmp.Equal(got, []string{"late"}) {
		t.Fatalf("grants %v, want late's new work ahead of acme's other retry", got)
	}
	if s := d.Stats(); s.Used != 2 || s.Waiting != [2]int{0, 1} {
		t.Fatalf("stats %+v, want both slots used and acme's retry waiting", s)
	}
}

// TestDispatchCappedNewWorkHoldsNoRetry: new work that cannot be granted,
// because its tenant holds its cap, does not hold other tenants' retries
// back, however late it is: free slots go to them.
func TestDispatchCappedNewWorkHoldsNoRetry(t *testing.T) {
	clk := &clock{now: t0}
	d := dispatch.New(dispatch.Config{Slots: 4, TenantCap: 2, Now: clk.Now})
	g := &grants{}
	for range 3 {
		d.Acquire("hang", "h1", due.ClassNew, func() { g.add("hang") })
	}
	if got := g.take(); len(got) != 2 {
		t.Fatalf("hang got %d slots, want its cap 2", len(got))
	}
	clk.Add(time.Minute) // hang's third request is long past the objective
	d.Acquire("ok", "o1", due.ClassRetry, func() { g.add("ok retry") })
	d.Acquire("ok", "o2", due.ClassRetry, func() { g.add("ok retry") })
	if got := g.take(); !cmp.Equal(got, []string{"ok retry", "ok retry"}) {
		t.Fatalf("grants %v, want both of ok's retries at once: two slots are free and hang may not take them", got)
	}
	if s := d.Stats(); s.Used != 4 || s.Waiting != [2]int{1, 0} {
		t.Fatalf("stats %+v, want every slot used and hang's new work waiting", s)
	}
}

// TestDispatchTenants: the tenants held back now, and only those.
func TestDispatchTenants(t *testing.T) {
	d := dispatch.New(dispatch.Config{Slots: 3, TenantCap: 2})
	for range 3 {
		d.Acquire("busy", "b1", due.ClassNew, func() {})
	}
	d.Acquire("calm", "c1", due.ClassNew, func() {})
	d.Acquire("late", "l1", due.ClassRetry, func() {})
	got := d.Tenants()
	slices.SortFunc(got, func(a, b dispatch.TenantStats) int { return strings.Compare(a.TenantID, b.TenantID) })
	want := []dispatch.TenantStats{
		{TenantID: "busy", Held: 2, Cap: 2, AtCap: true, Waiting: [2]int{1, 0}},
		{TenantID: "late", Cap: 2, Waiting: [2]int{0, 1}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tenants (-want +got):\n%s", diff)
	}
}

// TestDispatchHangingTenantShrinks: a tenant whose attempts time out holds
// fewer slots, down to the floor, and the others get what it leaves; as
// its attempts are answered again it gets its cap back.
func TestDispatchHangingTenantShrinks(t *testing.T) {
	d := dispatch.New(dispatch.Config{Slots: 64}) // cap 48, floor 4
	var mu sync.Mutex
	held := map[string]int{}
	grant := func(tenant string) func() {
		return func() { mu.Lock(); held[tenant]++; mu.Unlock() }
	}
	acquire := func(tenant string, n int) {
		for range n {
			d.Acquire(tenant, tenant+"1", due.ClassNew, grant(tenant))
		}
	}
	release := func(tenant string, o dispatch.Outcome, n int) {
		for range n {
			mu.Lock()
			held[tenant]--
			mu.Unlock()
			d.Release(tenant, tenant+"1", o)
		}
	}
	stats := func(tenant string) dispatch.TenantStats {
		for _, ts := range d.Tenants() {
			if ts.TenantID == tenant {
				return ts
			}
		}
		return dispatch.TenantStats{}
	}
	acquire("hang", 500)
	if held["hang"] != 48 {
		t.Fatalf("hang holds %d slots, want its cap 48", held["hang"])
	}
	// Every attempt times out, and each slot given back is asked for
	// again by the work waiting.
	release("hang", dispatch.TimedOut, 100)
	if s := stats("hang"); held["hang"] != 4 || s.Held != 4 || s.Cap != 4 || !s.AtCap {
		t.Fatalf("after 100 timeouts hang holds %d (%+v), want the floor of 4", held["hang"], s)
	}
	acquire("ok", 100)
	if held["ok"] != 48 {
		t.Fatalf("another tenant got %d slots, want its cap 48: the hanging tenant leaves them", held["ok"])
	}
	// hang's endpoint answers again.
	release("hang", dispatch.Answered, 40)
	if s := stats("hang"); held["hang"] != 16 || s.Cap < 40 {
		t.Fatalf("after 40 answers hang holds %d with cap %d, want the 16 free slots and a cap of 40 or more", held["hang"], s.Cap)
	}
	// A slot given back unused counts as neither.
	before := stats("hang").Cap
	release("hang", dispatch.Unused, 1)
	if s := stats("hang"); s.Cap != before {
		t.Fatalf("an unused slot moved the cap from %d to %d", before, s.Cap)
	}
}

// TestDispatchHangingTenantRemembered: a hanging tenant whose attempts
// come in waves (its endpoints' circuits open together and probe
// together) holds and waits for nothing between them; the share of its
// attempts that timed out outlives those gaps, fading with time, so the
// next wave starts near the floor instead of at the full cap.
func TestDispatchHangingTenantRemembered(t *testing.T) {
	clk := &clock{now: t0}
	d := dispatch.New(dispatch.Config{Slots: 64, Now: clk.Now}) // cap 48, floor 4
	var mu sync.Mutex
	held := 0
	wave := func() int {
		mu.Lock()
		held = 0
		mu.Unlock()
		for range 48 {
			d.Acquire("hang", "hang1", due.ClassRetry, func() { mu.Lock(); held++; mu.Unlock() })
		}
		mu.Lock()
		defer mu.Unlock()
		return held
	}
	// endWave gives back every slot with o and drops what still waits:
	// the tenant then holds and waits for nothing.
	endWave := func(o dispatch.Outcome) {
		for range held {
			d.Release("hang", "hang1", o)
		}
		d.Leave("hang", "hang1")
		if ts := d.Tenants(); len(ts) != 0 {
			t.Fatalf("between waves the dispatcher still reports %+v", ts)
		}
	}

	if got := wave(); got != 48 {
		t.Fatalf("the first wave got %d slots, want the full cap of 48", got)
	}
	endWave(dispatch.TimedOut)
	for i := range 4 {
		clk.Add(10 * time.Second)
		if got := wave(); got > 8 {
			t.Fatalf("wave %d, 10 s after the last timed out, got %d slots; want the floor of 4 or a few more", i+2, got)
		}
		endWave(dispatch.TimedOut)
	}
	// Hours without an attempt: the timeouts are forgotten.
	clk.Add(4 * time.Hour)
	if got := wave(); got != 48 {
		t.Fatalf("a wave 4 h later got %d slots, want the full cap of 48", got)
	}
}
