package main

import (
	"context"
	"fmt"
	"time"
)

// faultSpec is one fault of the acceptance run. A fault lasts as long as
// the healthy load publishes (--duration); the node runs with nodeFaults
// (`hookline serve --faults`) meanwhile, and prepare, during, after and
// load add what happens outside the node.
type faultSpec struct {
	name    string
	summary string
	// nodeFaults is the node's --faults while the fault lasts ("" none).
	nodeFaults string
	// kills: the node's faults kill it; it is restarted with them until
	// --kills processes died, then without.
	kills bool
	// healthyP99 judges the healthy tenants' first-attempt p99 against
	// the baseline: for faults that some tenants suffer and not others.
	healthyP99 bool
	// pgOnly runs only on a cluster (--pg).
	pgOnly  bool
	prepare func(ctx context.Context, a *acceptance, fr *faultRun) error
	during  func(ctx context.Context, a *acceptance, fr *faultRun) error // until ctx ends with the fault
	after   func(ctx context.Context, a *acceptance, fr *faultRun)
	load    func(l *Load)
}

// faultList is every fault, in the order the acceptance run plays them.
var faultList = []faultSpec{
	{name: "baseline", summary: "no fault: the healthy tenants' figures before any fault", healthyP99: true},
	{
		name: "producer-twice", summary: "the producer publishes every batch twice (a relay that died after publishing): the second is answered as a duplicate",
		healthyP99: true,
		load:       func(l *Load) { l.Twice = true },
		after: func(_ context.Context, a *acceptance, fr *faultRun) {
			fr.figures["republished"] = float64(a.b.republished.Swap(0))
			if n := a.b.republishDiffer.Swap(0); n > 0 {
				fr.notes = append(fr.notes, fmt.Sprintf("%d republished events were not answered as the same duplicate", n))
			}
		},
	},
	{
		name: "fanout-midway", summary: "the node is killed (SIGKILL) while appending a multi-chunk plan: before, during or just after it lands",
		nodeFaults: "kill-in-plan=20", kills: true,
	},
	{
		name: "duplicate-due", summary: "every pull hands the endpoint's previous pull out again, every wake is sent twice",
		nodeFaults: "duplicate-due,duplicate-wakes", healthyP99: true,
	},
	{
		name: "kill-after-2xx", summary: "the node is killed after the receiver answered 2xx and before the success is recorded",
		nodeFaults: "kill-after-2xx=100", kills: true,
	},
	{
		name: "retry-storm", summary: "every endpoint answers 429 with Retry-After at once, for --storm (then 200)",
		during: func(ctx context.Context, a *acceptance, fr *faultRun) error {
			a.b.recv.SetDefault(Behaviour{Mix: []StatusWeight{{Status: 429, Weight: 1}}, RetryAfter: a.b.cfg.RetryAfter})
			defer a.b.recv.SetDefault(Behaviour{})
			return sleepCtx(ctx, min(a.b.cfg.Storm, a.b.cfg.Duration))
		},
		after: func(_ context.Context, a *acceptance, fr *faultRun) {
			a.b.recv.SetDefault(Behaviour{})
			fr.figures["answers_429"] = float64(a.b.recv.Stats().ByStatus["429"])
		},
	},
	{
		name: "hanging-tenant", summary: "one tenant's endpoints all hang (--hang-endpoints, until its --hang-timeout) beside the healthy tenants",
		healthyP99: true,
		prepare: func(ctx context.Context, a *acceptance, fr *faultRun) error {
			b := a.b
			settings := b.cfg.settings()
			settings.TimeoutMs = int32(b.cfg.HangTimeout / time.Millisecond)
			t, err := b.AddTenant(ctx, TenantSpec{Name: "hanging_tenant_a", Endpoints: b.cfg.HangEndpoints, Fanout: b.cfg.HangEndpoints,
				Behaviour: &Behaviour{Hang: true}, Settings: settings})
			if err != nil {
				return err
			}
			fr.extra = append(fr.extra, t)
			return nil
		},
		during: func(ctx context.Context, a *acceptance, fr *faultRun) error {
			l := a.b.load(fr.extra, a.b.cfg.HangRate, a.b.cfg.Duration, fr.phase)
			l.MaxBacklog, l.Retry, l.Until = 0, true, ctx.Done()
			if len(a.apis) > 1 {
				l.APIs = a.apis
			}
			// The load ends with the fault, its calls under way answered.
			_, err := a.b.Publish(context.WithoutCancel(ctx), l)
			return err
		},
		after: func(_ context.Context, a *acceptance, fr *faultRun) {
			// The tenant's endpoints come back: its deliveries drain on
			// their retry schedule (they are not awaited).
			for _, ep := range fr.extra[0].Endpoints {
				a.b.recv.SetBehaviour(ep, Behaviour{})
			}
			fr.figures["hung_attempts"] = float64(a.b.recv.Stats().Hung)
		},
	},
	{
		name: "slow-fsync", summary: "every durable append of the log takes 20 ms longer",
		nodeFaults: "slow-append=20ms",
	},
	{
		name: "unknown-outcome", summary: "every 200th append lands and then fails as if its acknowledgement was lost",
		nodeFaults: "unknown-every=200",
	},
	{
		name: "pg-restart", summary: "the PostgreSQL server restarts under load, --pg-restarts times (immediate shutdown: a crash, recovered from its WAL at start)",
		pgOnly: true,
		prepare: func(ctx context.Context, a *acceptance, _ *faultRun) error {
			return a.apis[0].CreateTenant(ctx, pgProbeTenant)
		},
		during: func(ctx context.Context, a *acceptance, fr *faultRun) error {
			n := max(a.b.cfg.PGRestarts, 1)
			start, every := time.Now(), a.b.cfg.Duration/time.Duration(n+1)
			var most time.Duration
			for i := range n {
				if err := sleepCtx(ctx, time.Until(start.Add(time.Duration(i+1)*every))); err != nil {
					fr.notes = append(fr.notes, fmt.Sprintf("%d of %d restarts fit in the load: lengthen --duration (a restart takes seconds)", i, n))
					return nil
				}
				began := time.Now()
				took, err := a.pg.restart(ctx)
				if err != nil {
					return err
				}
				served, err := a.servedAgain(ctx, i+1)
				if err != nil {
					return err
				}
				a.b.ledger.disturbed("PostgreSQL restart", began, served)
				fr.figures["pg_restarts"], most = float64(i+1), max(most, took)
				fr.figures["pg_restart_max_s"] = round(most.Seconds(), 2)
			}
			return nil
		},
	},
}

// faultNames lists the faults, for --only's help.
func faultNames() []string {
	var out []string
	for _, f := range faultList {
		out = append(out, f.name)
	}
	return out
}
