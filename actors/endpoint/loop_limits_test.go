package endpoint_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestDispatcherIsolatesHangingTenant: a tenant whose receivers hang until
// the attempt timeout holds at most its cap of the node's slots; another
// tenant's first attempts start at once.
func TestDispatcherIsolatesHangingTenant(t *testing.T) {
	b := newBench(t)
	d := dispatch.New(dispatch.Config{Slots: 8})
	b.cfg.Dispatcher = d
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		if r.URL.Path == "/hang" {
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	t.Cleanup(func() { close(release) })

	for i := range 3 {
		ep := fmt.Sprint("ep_hang", i)
		b.endpoint("slow", ep, rc.URL+"/hang", func(s *controlv1.EndpointSettings) { s.TimeoutMs = 10_000 })
		for j := range 10 {
			b.publish("slow", fmt.Sprint("evt_", i, "_", j), ep)
		}
	}
	waitUntil(t, "the hanging tenant at its cap", func() bool {
		s := d.Stats()
		return s.Used == 6 && s.Waiting[due.ClassNew] > 0
	})

	b.endpoint("fast", "ep_ok", rc.URL+"/ok", nil)
	published := map[string]time.Time{}
	var ids []string
	for j := range 10 {
		id := b.publish("fast", fmt.Sprint("evt_", j), "ep_ok")[0]
		published[id] = time.Now()
		ids = append(ids, id)
	}
	b.waitStatus("fast", history.Succeeded, ids...)
	var worst time.Duration
	for _, h := range rc.all() {
		if at, ok := published[h.id]; ok {
			worst = max(worst, h.at.Sub(at))
		}
	}
	t.Logf("healthy tenant: worst first-attempt latency %v while the other tenant hangs in %d slots", worst, d.Stats().Used)
	if worst > time.Second {
		t.Fatalf("the healthy tenant waited %v for a first attempt", worst)
	}
	if s := d.Stats(); s.Used > 6 {
		t.Fatalf("the hanging tenant holds %d slots, over its cap", s.Used)
	}
}

// tenant spawns the tenant grain of id, created with quota; it stops at
// the end of the test.
func (b *bench) tenant(id string, quota *hooklinev1.Quota) *actor.PID {
	b.t.Helper()
	tp := b.sys.Root.Spawn(tenant.Props(tenant.Config{Log: b.log, Now: b.clk.Now, Logger: quiet}, id))
	b.t.Cleanup(func() { b.sys.Root.StopFuture(tp).Wait() })
	res, err := b.sys.Root.RequestFuture(tp, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Create{Create: &controlv1.CreateTenantRequest{
		Name: id, Quota: quota,
	}}}, 5*time.Second).Result()
	if err != nil || res.(*internalv1.TenantReply).GetError() != nil {
		b.t.Fatalf("create tenant: %v %v", res, err)
	}
	return tp
}

// localGrains reaches grains spawned in the test's actor system: the
// node's Request without the cluster.
type localGrains struct {
	sys  *actor.ActorSystem
	pids map[string]*actor.PID // by kind/identity
}

func (g localGrains) Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error) {
	res, err := g.sys.Root.RequestFuture(g.pids[kind+"/"+identity], msg, 5*time.Second).Result()
	if err != nil {
		return nil, err
	}
	return res.(proto.Message), nil
}

// TestTenantLease: the endpoint stays within its tenant's quota (in-flight
// 2), below its own limit (10).
func TestTenantLease(t *testing.T) {
	b := newBench(t)
	tp := b.tenant("acme", &hooklinev1.Quota{AttemptsPerSecond: 1000, MaxInFlight: 2})
	b.cfg.Grains = localGrains{sys: b.sys, pids: map[string]*actor.PID{tenant.Kind + "/acme": tp}}

	gate := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) {
		select {
		case <-gate:
		case <-time.After(200 * time.Millisecond):
		}
		w.WriteHeader(http.StatusOK)
	})
	b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	ids := publishMany(b, "acme", "ep_1", 12)
	waitActive(t, rc, "two attempts in flight", 2)
	close(gate)
	succeedAll(t, b, "acme", ids)
	rc.mu.Lock()
	peak := rc.peak
	rc.mu.Unlock()
	if peak != 2 {
		t.Fatalf("peak concurrency %d, want the tenant's in-flight quota 2", peak)
	}
}

// TestRetriesGoOnBesideCappedTenant: a tenant at its cap of the node's
// slots, whose new work waits (late, but not grantable: it cannot take a
// slot before one of its own frees), does not hold another tenant's
// retries back while slots sit idle: the other tenant's retry and its new
// delivery both run.
func TestRetriesGoOnBesideCappedTenant(t *testing.T) {
	b := newBench(t)
	d := dispatch.New(dispatch.Config{Slots: 2, Now: b.clk.Now}) // a tenant holds 1 slot at most

	b.cfg.Dispatcher = d
	release := make(chan struct{})
	var flaky atomic.Int32
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request, n int) {
		switch {
		case r.URL.Path == "/hang":
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case r.URL.Path == "/flaky" && flaky.Add(1) == 1: // the first request only
			w.WriteHeader(http.StatusInternalServerError)
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	t.Cleanup(func() { close(release) }) // before the receiver closes
	// Tenant "slow": one attempt hangs in its one slot, its next delivery
	// waits for a slot as new work.
	b.endpoint("slow", "ep_hang", rc.URL+"/hang", func(s *controlv1.EndpointSettings) { s.MaxInFlight, s.TimeoutMs = 2, 30_000 })
	b.publish("slow", "evt_1", "ep_hang")
	b.publish("slow", "evt_2", "ep_hang")
	waitUntil(t, "the slow tenant at its cap, new work waiting", func() bool {
		s := d.Stats()
		return s.Used == 1 && s.Waiting[due.ClassNew] == 1
	})
	// Tenant "acme": a delivery fails once; its retry is due 2.5 s later,
	// when the slow tenant's waiting new work is late (objective 1 s).
	b.endpoint("acme", "ep_1", rc.URL+"/flaky", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 1 })
	first := b.publish("acme", "evt_a", "ep_1")[0]
	b.waitEvents(first, 1)
	b.advance(2500 * time.Millisecond)
	b.waitStatus("acme", history.Succeeded, first)
	id := b.publish("acme", "evt_b", "ep_1")[0]
	b.waitStatus("acme", history.Succeeded, id)
	if got := rc.count(first); got != 2 {
		t.Fatalf("acme's first delivery was attempted %d times, want 2 (the failure and its retry)", got)
	}
}

// gatedGrains is localGrains behind a link that can go down: the tenant's
// grain then cannot be reached, as when its member died or it moves. It
// counts the lease requests that reached the tenant grain.
type gatedGrains struct {
	localGrains
	down  atomic.Bool
	asked atomic.Int32
	// onAsk, when set, is called at each request before it is sent.
	onAsk func()
}

func (g *gatedGrains) Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error) {
	if g.onAsk != nil {
		g.onAsk()
	}
	if g.down.Load() {
		return nil, fmt.Errorf("%s/%s cannot be reached", kind, identity)
	}
	res, err := g.localGrains.Request(ctx, kind, identity, msg)
	g.asked.Add(1)
	return res, err
}

// firstPeriodSpent starts an endpoint of a tenant allowed 10 attempts a
// second, with 30 deliveries, and returns once the first period's 10
// attempts are made and its share is spent: used up, the endpoint asked
// once more in vain, and waits (no request spins).
func firstPeriodSpent(t *testing.T) (*bench, *gatedGrains, *receiver) {
	t.Helper()
	b := newBench(t)
	tp := b.tenant("acme", &hooklinev1.Quota{AttemptsPerSecond: 10, MaxInFlight: 10})
	g := &gatedGrains{localGrains: localGrains{sys: b.sys, pids: map[string]*actor.PID{tenant.Kind + "/acme": tp}}}
	b.cfg.Grains = g

	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	b.endpoint("acme", "ep_1", rc.URL+"/in", nil)
	for j := range 30 {
		b.publish("acme", fmt.Sprint("evt_", j), "ep_1")
	}
	waitUntil(t, "the first period's 10 attempts", func() bool { return len(rc.all()) >= 10 })
	waitUntil(t, "the period's share spent", func() bool { return g.asked.Load() >= 2 })
	return b, g, rc
}

// TestLeaseRenewedAhead: a busy endpoint renews its lease in the period's
// last quarter and goes on across the period's end under the lease granted
// ahead, without asking its tenant's grain then, so that attempts never
// wait at a period's end for a round trip, nor for the tenant grain while
// it cannot be reached; the tenant's 10 attempts per second still hold.
// When the tenant grain cannot be reached for the next renewal, the
// fallback lease follows the current one.
func TestLeaseRenewedAhead(t *testing.T) {
	b, g, rc := firstPeriodSpent(t)
	received := func(n int) func() bool { return func() bool { return len(rc.all()) >= n } }
	if n, asked := len(rc.all()), g.asked.Load(); n != 10 || asked != 2 {
		t.Fatalf("first period: %d attempts, %d lease requests; want 10, and 2 requests", n, asked)
	}
	b.advance(800 * time.Millisecond) // the period's last quarter
	// Asked ahead, the first period's lease used up: the second's goes on
	// at once, until it is used up too and asked once more in vain.
	waitUntil(t, "the next period's lease asked ahead and spent", func() bool { return g.asked.Load() >= 4 })
	g.down.Store(true)
	b.advance(200 * time.Millisecond) // the period ends, under the lease granted ahead
	waitUntil(t, "the second period's 10 attempts", received(20))
	if n, asked := len(rc.all()), g.asked.Load(); n != 20 || asked != 4 {
		t.Fatalf("second period: %d attempts, %d lease requests; want 20, and no request at the period's end", n, asked)
	}
	b.advance(800 * time.Millisecond) // asks ahead again: unreachable, a fallback follows
	b.advance(200 * time.Millisecond)
	waitUntil(t, "the rest under the fallback lease", received(30))
}

// TestLeaseUsedUpGoesOnUnderNext: an endpoint that has used its lease up
// when the next period's comes, asked ahead, goes on under it at once
// instead of waiting for the current period's end: a busy endpoint whose
// share grew past its last ask waited up to a quarter of a period at every
// period's end. The tenant's quota holds per period: the next period's 10
// attempts, started early, are all it gets until that lease is renewed.
func TestLeaseUsedUpGoesOnUnderNext(t *testing.T) {
	b, g, rc := firstPeriodSpent(t)
	received := func(n int) func() bool { return func() bool { return len(rc.all()) >= n } }
	b.advance(800 * time.Millisecond) // the period's last quarter: asks ahead
	// The clock stays in the first period: the next period's attempts
	// start under the lease granted ahead.
	waitUntil(t, "the next period's 10 attempts, started as its lease came", received(20))
	// Used up again, it asks once more in vain, and the quota holds: two
	// periods' grants, no more.
	waitUntil(t, "the next period's share spent", func() bool { return g.asked.Load() >= 4 })
	if n, asked := len(rc.all()), g.asked.Load(); n != 20 || asked != 4 {
		t.Fatalf("%d attempts and %d lease requests once the lease granted ahead was used; want 20 and 4 (per period: one for the lease, one in vain)", n, asked)
	}
}

// TestProvisionalLease: a grain on a partition its node took over lately
// starts attempts, up to its in-flight limit (3), before its tenant's
// grain answers its first lease request; what it started counts against
// that first lease, so the tenant's 10 attempts a second hold for the
// period: 10 attempts in all, not 13.
func TestProvisionalLease(t *testing.T) {
	b := newBench(t)
	tp := b.tenant("acme", &hooklinev1.Quota{AttemptsPerSecond: 10, MaxInFlight: 10})
	g := &lateGrains{localGrains: localGrains{sys: b.sys, pids: map[string]*actor.PID{tenant.Kind + "/acme": tp}}, release: make(chan struct{})}
	g.late.Store(true) // from the first request
	b.cfg.Grains = g
	b.cfg.LeaseTimeout = time.Minute // the answer comes when the test says
	var asked atomic.Int32
	b.cfg.ProvisionalLease = func(p events.Partition) bool {
		asked.Add(1)
		return p == events.PartitionOf("ep_1")
	}

	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 3 })
	for j := range 30 {
		b.publish("acme", fmt.Sprint("evt_", j), "ep_1")
	}
	waitUntil(t, "three attempts before the tenant answered", func() bool { return len(rc.all()) >= 3 })
	if n := g.answered.Load(); n != 0 {
		t.Fatalf("the tenant answered %d lease requests before the attempts; want them started under the provisional lease", n)
	}
	close(g.release)
	// The first lease grants 10; 3 are taken: 7 more, then one request in
	// vain, and the period's share is spent.
	waitUntil(t, "the first period's attempts", func() bool { return len(rc.all()) >= 10 })
	waitUntil(t, "the period's share spent", func() bool { return g.answered.Load() >= 2 })
	if n := len(rc.all()); n != 10 {
		t.Fatalf("%d attempts in the first period; want 10, the provisional 3 counted against the first lease", n)
	}
	if n := asked.Load(); n != 1 {
		t.Fatalf("ProvisionalLease asked %d times; want once, for the grain's first lease", n)
	}
}

// lateGrains is localGrains whose answers wait, once late is set, until
// release is closed: a tenant grain that answers late (on a busy member,
// or moving). It counts the requests and the answers.
type lateGrains struct {
	localGrains
	late            atomic.Bool
	release         chan struct{}
	asked, answered atomic.Int32
}

func (g *lateGrains) Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error) {
	g.asked.Add(1)
	if g.late.Load() {
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	res, err := g.localGrains.Request(ctx, kind, identity, msg)
	g.answered.Add(1)
	return res, err
}

// TestLateRenewalGoesOnProvisionally: a busy endpoint whose lease ends
// while its renewal, asked ahead, is unanswered goes on under a
// provisional lease of its in-flight limit (3) instead of stopping until
// the answer; what it started then counts against the renewal, so the
// tenant's 10 attempts a second hold: 20 in two periods, not 23.
func TestLateRenewalGoesOnProvisionally(t *testing.T) {
	b := newBench(t)
	tp := b.tenant("acme", &hooklinev1.Quota{AttemptsPerSecond: 10, MaxInFlight: 10})
	g := &lateGrains{localGrains: localGrains{sys: b.sys, pids: map[string]*actor.PID{tenant.Kind + "/acme": tp}}, release: make(chan struct{})}
	b.cfg.Grains = g
	b.cfg.LeaseTimeout = time.Minute // the late answer comes when the test says

	rc := newReceiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusOK) })
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight = 3 })
	for j := range 30 {
		b.publish("acme", fmt.Sprint("evt_", j), "ep_1")
	}
	waitUntil(t, "the first period's 10 attempts", func() bool { return len(rc.all()) >= 10 })
	// Spent, and no request in flight: the next one is the renewal asked
	// ahead.
	waitUntil(t, "the period's share spent", func() bool {
		return g.answered.Load() >= 2 && g.asked.Load() == g.answered.Load()
	})
	g.late.Store(true)
	answered := g.answered.Load()
	b.advance(800 * time.Millisecond) // the period's last quarter: asks ahead, unanswered
	waitUntil(t, "the renewal asked ahead", func() bool { return g.asked.Load() > answered })
	b.advance(200 * time.Millisecond) // the lease ends
	waitUntil(t, "three attempts after the lease ended, its renewal unanswered", func() bool {
		b.advance(0) // wake the grain again: its timer runs on the real clock
		return len(rc.all()) >= 13
	})
	if n := g.answered.Load(); n != answered {
		t.Fatalf("%d lease answers came before the provisional attempts; want none", n-answered)
	}
	close(g.release)
	waitUntil(t, "the renewal's attempts", func() bool { return len(rc.all()) >= 20 })
	waitUntil(t, "the renewed period's share spent", func() bool { return g.answered.Load() >= answered+2 })
	if n := len(rc.all()); n != 20 {
		t.Fatalf("%d attempts in two periods; want 20, the provisional 3 counted against the renewal", n)
	}
}

// TestLeaseAskedBeforeUsedUp: an endpoint whose lease runs low (no more
// left than its in-flight limit, 2) asks its tenant for more of the
// period's share while its attempts run, not once the lease is used up,
// when its next attempt would wait for the answer: with both of its
// attempts held by the receiver, the second request is out already. The
// tenant (4 attempts a second) grants no more than its quota: 4 attempts
// in the period and no request once it granted none, the rest in the
// periods after.
func TestLeaseAskedBeforeUsedUp(t *testing.T) {
	b := newBench(t)
	tp := b.tenant("acme", &hooklinev1.Quota{AttemptsPerSecond: 4, MaxInFlight: 10})
	g := &gatedGrains{localGrains: localGrains{sys: b.sys, pids: map[string]*actor.PID{tenant.Kind + "/acme": tp}}}
	b.cfg.Grains = g
	var rc *receiver
	var attemptsAtSecond atomic.Int32 // attempts the receiver had when the second request was sent
	attemptsAtSecond.Store(-1)
	g.onAsk = func() {
		if g.asked.Load() == 1 {
			attemptsAtSecond.CompareAndSwap(-1, int32(len(rc.all())))
		}
	}

	gate := make(chan struct{})
	rc = newReceiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		// The headers at once, the body once the gate opens: the attempt
		// runs until then (its timeout, 30 s, is past the waits below).
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
		}
	})
	b.endpoint("acme", "ep_1", rc.URL+"/in", func(s *controlv1.EndpointSettings) { s.MaxInFlight, s.TimeoutMs = 2, 30_000 })
	ids := publishMany(b, "acme", "ep_1", 10)
	waitActive(t, rc, "two attempts held by the receiver", 2)
	waitUntil(t, "a second lease request", func() bool { return g.asked.Load() >= 2 })
	if n := attemptsAtSecond.Load(); n > 2 {
		t.Fatalf("the second lease request was sent after %d attempts; want it out while the first two ran", n)
	}
	close(gate)
	waitUntil(t, "the period's 4 attempts", func() bool { return len(rc.all()) >= 4 })
	// Three requests at most: the first (for 2 attempts when it was sent
	// before the deliveries were ready, then 2 more early), and one
	// answered with nothing more; none once the share is spent.
	if n, asked := len(rc.all()), g.asked.Load(); n != 4 || asked > 3 {
		t.Fatalf("first period: %d attempts, %d lease requests; want the quota's 4, and 3 requests at most", n, asked)
	}
	succeedAll(t, b, "acme", ids)
}

// publishMany publishes n events for one endpoint and returns their
// deliveries.
func publishMany(b *bench, tenantID, endpointID string, n int) []string {
	var ids []string
	for j := range n {
		ids = append(ids, b.publish(tenantID, fmt.Sprint("evt_", j), endpointID)...)
	}
	return ids
}

// waitActive waits until the receiver holds n requests at once.
func waitActive(t *testing.T, rc *receiver, what string, n int) {
	t.Helper()
	waitUntil(t, what, func() bool {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return rc.active == n
	})
}

// succeedAll waits until every delivery of ids succeeded, moving the
// injected clock a second at a time: a lease lasts a second of it, and
// new leases are granted once it moves.
func succeedAll(t *testing.T, b *bench, tenantID string, ids []string) {
	t.Helper()
	waitUntil(t, "every delivery succeeded", func() bool {
		b.advance(time.Second)
		for _, id := range ids {
			if b.status(tenantID, id).Status != history.Succeeded {
				return false
			}
		}
		return true
	})
}
