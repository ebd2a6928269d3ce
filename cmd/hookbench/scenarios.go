package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// rawEndpoint is the receiver path of the raw loop.
const rawEndpoint = "raw"

// scenario is one `hookbench run` scenario: its defaults and its run.
type scenario struct {
	summary  string
	defaults RunConfig
	run      func(ctx context.Context, b *Bench) (Summary, error)
	// config names the settings of its own that its summary prints under
	// "config" (RunConfig.view), beside the ones every scenario uses.
	config []string
	// cluster scenarios start their own nodes (cluster.go), point b.api at
	// one, confirm the counts and fill the node figures themselves, and
	// print their own progress.
	cluster bool
	// own, when set, replaces run: the scenario starts its own nodes and
	// prints its own table and JSON line (acceptance).
	own func(ctx context.Context, b *Bench, stdout io.Writer) error
}

var scenarios = map[string]scenario{
	"throughput": {
		summary:  "10 tenants × 10 endpoints, 1.5 KB, each event to 4 endpoints, as fast as accepted; against the raw loop",
		defaults: RunConfig{Duration: 30 * time.Second, Tenants: 10, Endpoints: 10, Fanout: 4, MaxBacklog: 20000, EndpointRate: 1000, EndpointInFlight: 50},
		run:      throughput, config: []string{"raw_duration", "raw_workers"},
	},
	"ordering": {
		summary:  "as throughput, once with unordered endpoints, then with endpoints ordered by key and events of --ordering-keys keys (1000): deliveries/s ratio, each key's order checked",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 10, Endpoints: 10, Fanout: 4, MaxBacklog: 20000, EndpointRate: 1000, EndpointInFlight: 50, OrderingKeys: 1000},
		run:      ordering, config: []string{"ordering_keys"},
	},
	"pull": {
		summary:  "4 tenants × 10 endpoints as fast as accepted, once to push endpoints, then to pull endpoints drained by one consumer each (lease 30 s, up to 100 a pull; 40 consumers stay under the caller's 64 calls in flight): deliveries/s ratio",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, MaxBacklog: 20000, EndpointRate: 1000, EndpointInFlight: 50},
		run:      pullVsPush,
	},
	"ordering-failure": {
		summary: "one tenant's endpoints ordered by key, 1,000 keys × 10 events (--rate 200 events/s for 50 s), then again while one key's receiver answers 503 for --storm (30s): the other keys' first-attempt p99 ratio, each key's order checked",
		defaults: RunConfig{Duration: 50 * time.Second, Tenants: 1, Endpoints: 10, Fanout: 4, Rate: 200, OrderingKeys: 1000, Storm: 30 * time.Second, Drain: 120 * time.Second,
			EndpointRate: 1000, EndpointInFlight: 50},
		run: orderingFailure, config: []string{"ordering_keys", "storm"},
	},
	"sealing": {
		summary:  "as throughput, on the node restarted with --plain-payloads, then restarted with payloads sealed under per-tenant data keys (the default): deliveries/s and CPU per delivery of each, and their ratios",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 10, Endpoints: 10, Fanout: 4, MaxBacklog: 20000, EndpointRate: 1000, EndpointInFlight: 50},
		run:      sealingScenario,
	},
	"latency": {
		summary:  "a fixed rate at half the maximum (--rate events/s, or measured first): first-attempt latency",
		defaults: RunConfig{Duration: 30 * time.Second, Tenants: 10, Endpoints: 10, Fanout: 4, MaxBacklog: 20000, EndpointRate: 1000, EndpointInFlight: 50},
		run:      latency,
	},
	"fairness": {
		summary:  "tenant B at a steady rate alone, then beside tenant A whose 500 endpoints hang: B's first-attempt p99",
		defaults: RunConfig{Duration: 20 * time.Second, Endpoints: 10, Fanout: 4, Rate: 50, HangEndpoints: 500, HangRate: 2, HangTimeout: 5 * time.Second, Drain: 60 * time.Second},
		run:      fairness, config: []string{"hang_endpoints", "hang_rate", "hang_timeout"},
	},
	"retry-storm": {
		summary:  "every endpoint answers 429 with Retry-After for 20 s, then 200: attempts per delivery, time to drain",
		defaults: RunConfig{Duration: 10 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, Rate: 100, Storm: 20 * time.Second, RetryAfter: 5 * time.Second},
		run:      retryStorm, config: []string{"storm", "retry_after"},
	},
	"crash": {
		summary:  "kill -9 the node at least 5 times while publishing, restart on the same data: lost = 0, duplicates explained",
		defaults: RunConfig{Duration: 60 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, Rate: 100, Kills: 6},
		run:      crash, config: []string{"kills"},
	},
	"brokers": {
		summary: "nats-server and RabbitMQ on loopback: the throughput load to HTTP, NATS JetStream and RabbitMQ endpoints (--duration each, deliveries/s ratios), then --broker-deliveries (10,000) at --rate events/s to each broker while the node is killed --kills times (2): lost and repeats counted from what the broker holds",
		defaults: RunConfig{Duration: 10 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, Rate: 250, Kills: 2, MaxBacklog: 20000,
			EndpointRate: 1000, EndpointInFlight: 50, Drain: 120 * time.Second, BrokerDeliveries: 10_000},
		run: brokerScenario, config: []string{"kills", "broker_deliveries"},
	},
	"cluster": {
		summary:  "--nodes nodes (3) on one PostgreSQL log, publishing round robin; kill -9 one node --kills times (1), from --kill-at: lost = 0, failover_s, duplicates_per_kill",
		defaults: RunConfig{Duration: 40 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, Rate: 200, Drain: 60 * time.Second, Kills: 1},
		run:      clusterFailover, config: []string{"nodes", "kills", "kill_at", "history", "standbys", "pg"}, cluster: true,
	},
	"rolling": {
		summary: "--nodes nodes (3) on one PostgreSQL log, a --history (300,000 deliveries), a steady load, then each node in turn stopped with SIGTERM and started again once the cluster is stable (the load reaches it once it says it is serving): lost, duplicates, max_stall_s, p99 steady and rolling, unavailable_answers",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, Rate: 200, Drain: 60 * time.Second,
			Nodes: 3, History: 300_000},
		run: rolling, config: []string{"nodes", "history", "standbys", "pg"}, cluster: true,
	},
	"scale-out": {
		summary: "--nodes nodes (2) on one PostgreSQL log under load with a --history (300,000 deliveries), then a third joins: as rolling, plus warmup_s",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 4, Endpoints: 10, Fanout: 4, Rate: 200, Drain: 60 * time.Second,
			Nodes: 2, History: 300_000},
		run: scaleOut, config: []string{"nodes", "history", "standbys", "pg"}, cluster: true,
	},
	"flood": {summary: "three nodes on one PostgreSQL log; anonymous calls flood one with made-up hk_ then hlp_ bearers beside a tenant publishing through it: CPU per call, publish p99, the other members, the log pool", defaults: RunConfig{Duration: 15 * time.Second, Tenants: 1, Endpoints: 10, Fanout: 4, Rate: 50, Drain: 60 * time.Second}, run: flood, cluster: true},
	"cluster-scale": {
		summary: "sustained deliveries/s and CPU per delivery with 1, 2 and 3 nodes on one PostgreSQL log (4 tenants × 50 endpoints, fan-out 4, as fast as accepted; --duration each, --rounds rounds (3) in alternating order)",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 4, Endpoints: 50, Fanout: 4, MaxBacklog: 4000, EndpointRate: 1000,
			EndpointInFlight: 50, Drain: 30 * time.Second, Rounds: 3},
		run: clusterScale, config: []string{"rounds", "standbys", "pg"}, cluster: true,
	},
	"acceptance": {
		summary: "every fault of the seed, one after another, on a fresh node (--pg: --nodes nodes on PostgreSQL): durable counts, the ledger's checks, duplicates explained, queue ages, healthy p99, reconcile's verdict, pass or fail",
		defaults: RunConfig{Duration: 20 * time.Second, Tenants: 2, Endpoints: 10, Fanout: 4, Rate: 50, Kills: 3, Storm: 10 * time.Second,
			RetryAfter: 3 * time.Second, HangEndpoints: 50, HangRate: 2, HangTimeout: 2 * time.Second, Drain: 120 * time.Second},
		config: []string{"kills", "storm", "retry_after", "hang_endpoints", "hang_rate", "hang_timeout", "nodes", "pg", "pg_restarts", "only"},
		own:    acceptanceRun,
	},
	"chaos": {
		summary:  "a random mix chosen by --seed (the same seed plays the same schedule) for --duration: publishing (ordered and not, fan-out, batches, again), endpoint changes (URL, secret header, rotation, pause, pull and push, receiver outages), tenant erasures, replays and window recoveries, kill -9, SIGTERM, rebuilt projections, PostgreSQL restarts and a member joining, on --nodes nodes on a PostgreSQL of its own (3), or one on the embedded log with a short retention (1); a checker outside the node asserts every promise of docs/semantics.md and prints the seed and a trace of each broken one",
		defaults: RunConfig{Duration: 2 * time.Minute, Nodes: 3, Drain: 4 * time.Minute, Seed: 1},
		own:      runChaos,
	},
}

func scenarioNames() string { return strings.Join(sortedKeys(scenarios), ", ") }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Run runs one scenario: it starts the receiver in this process and a node
// (or connects to cfg.Node), runs the scenario, prints progress to stderr
// and the table and JSON line to stdout.
func Run(ctx context.Context, cfg RunConfig, stdout, stderr io.Writer) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	sc := scenarios[cfg.Scenario]
	stderr = &lockedWriter{w: stderr}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	recv, err := NewReceiver("127.0.0.1:0", nil, Behaviour{Latency: cfg.ReceiverLatency})
	if err != nil {
		return err
	}
	recvDone := make(chan error, 1)
	go func() { recvDone <- recv.Run(ctx) }()
	defer func() {
		cancel()
		err = errors.Join(err, <-recvDone)
	}()

	b := newBench(cfg, recv, stderr, "hb"+strconv.FormatInt(time.Now().UnixMilli(), 36))
	b.config = sc.config
	addr := cfg.Node
	if sc.own != nil {
		fmt.Fprintf(stderr, "hookbench: %s: receiver %s, run %s\n", cfg.Scenario, recv.Addr(), b.runID)
		return sc.own(ctx, b, stdout)
	}
	if sc.cluster {
		fmt.Fprintf(stderr, "hookbench: %s: receiver %s, run %s\n", cfg.Scenario, recv.Addr(), b.runID)
		s, err := sc.run(ctx, b)
		if err != nil {
			return fmt.Errorf("%s: %w", cfg.Scenario, err)
		}
		return b.finish(s, stdout)
	}
	if addr == "" {
		node, cleanup, err := startOwnNode(ctx, cfg, stderr)
		if err != nil {
			return err
		}
		defer cleanup()
		b.node, addr = node, node.GRPCAddr()
		b.cfg.Token = node.cfg.AdminToken
	}
	if b.api, err = Dial(addr, b.cfg.Token); err != nil {
		return err
	}
	defer b.api.Close()

	pctx, stopProgress := context.WithCancel(ctx)
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		b.Progress(pctx, cfg.Progress)
	}()
	defer func() { stopProgress(); <-progressDone }()

	fmt.Fprintf(stderr, "hookbench: %s: receiver %s, node %s, run %s\n", cfg.Scenario, recv.Addr(), addr, b.runID)
	s, err := sc.run(ctx, b)
	stopProgress()
	<-progressDone
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.Scenario, err)
	}
	// With deliveries lost, the node's counts are asked once, not awaited.
	confirmFor := 30 * time.Second
	if s.Lost != 0 {
		confirmFor = 0
	}
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	if err := b.Confirm(cctx, &s, confirmFor); err != nil {
		s.Notes = append(s.Notes, "the node's counts do not match: "+err.Error())
	}
	ccancel()
	b.NodeFigures(&s)
	return b.finish(s, stdout)
}

// finish judges a summary, prints it, and fails the run when a check
// failed.
func (b *Bench) finish(s Summary, stdout io.Writer) error {
	s.Config = b.cfg.view(b.config)
	s.judge()
	return errors.Join(s.Print(stdout), s.verdict())
}

// startOwnNode builds (unless --hookline) and starts a node on a fresh data
// directory; cleanup stops it and removes the directory.
func startOwnNode(ctx context.Context, cfg RunConfig, stderr io.Writer) (*Node, func(), error) {
	dir, err := os.MkdirTemp("", "hookbench-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		if cfg.KeepData {
			fmt.Fprintf(stderr, "hookbench: data kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}
	bin := cfg.Hookline
	if bin == "" {
		fmt.Fprintf(stderr, "hookbench: building cmd/hookline\n")
		if bin, err = BuildNode(ctx, dir); err != nil {
			cleanup()
			return nil, nil, err
		}
	}
	token := make([]byte, 16)
	rand.Read(token)
	ncfg := NodeConfig{Binary: bin, DataDir: filepath.Join(dir, "data"), AdminToken: fmt.Sprintf("hb_%x", token), Args: faultArgs(cfg.NodeFaults)}
	if cfg.NodeLog {
		ncfg.Log = stderr
	}
	node, err := StartNode(ctx, ncfg)
	if err != nil {
		cleanup()
		return nil, nil, err
	}
	return node, func() {
		if err := node.Stop(30 * time.Second); err != nil {
			fmt.Fprintf(stderr, "hookbench: %v\n", err)
		}
		cleanup()
	}, nil
}

// faultArgs are the serve arguments that give a node faults ("" none).
func faultArgs(spec string) []string {
	if spec == "" {
		return nil
	}
	return []string{"--faults", spec}
}

// clusterArgs are the serve arguments of every node of a cluster: the
// faults, and the standbys when given.
func (c RunConfig) clusterArgs() []string {
	args := faultArgs(c.NodeFaults)
	if c.Standbys != "" {
		args = append(args, "--standbys", c.Standbys)
	}
	return args
}

// settings are the endpoint settings from the flags.
func (c RunConfig) settings() *controlv1.EndpointSettings {
	s := &controlv1.EndpointSettings{RatePerSecond: c.EndpointRate, Burst: int32(c.EndpointRate),
		MaxInFlight: int32(c.EndpointInFlight)}
	if c.OrderingKeys > 0 {
		s.Ordering = "key"
	}
	return s
}

// tenants makes cfg.Tenants awaited tenants named t0, t1, ...
func (b *Bench) makeTenants(ctx context.Context, prefix string) ([]*Tenant, error) {
	var ts []*Tenant
	for i := range b.cfg.Tenants {
		t, err := b.AddTenant(ctx, TenantSpec{Name: fmt.Sprintf("%s%d", prefix, i), Endpoints: b.cfg.Endpoints,
			Fanout: b.cfg.Fanout, Settings: b.cfg.settings(), Await: true})
		if err != nil {
			return nil, err
		}
		ts = append(ts, t)
	}
	return ts, nil
}

func (b *Bench) load(ts []*Tenant, rate float64, d time.Duration, phase int) Load {
	return Load{Tenants: ts, Rate: rate, Duration: d, Publishers: b.cfg.Publishers, Batch: b.cfg.Batch,
		Payload: b.cfg.Payload, Phase: phase, MaxBacklog: b.cfg.MaxBacklog, Keys: b.cfg.OrderingKeys}
}

// publishAndAwait publishes one load, waits for its deliveries and
// summarizes that phase.
func (b *Bench) publishAndAwait(ctx context.Context, name string, l Load) (Summary, error) {
	start := time.Now()
	if _, err := b.Publish(ctx, l); err != nil {
		return Summary{}, err
	}
	published := time.Now()
	if err := b.Await(ctx, b.cfg.Drain); err != nil {
		if errors.Is(err, ErrNoDelivery) {
			return Summary{}, err
		}
		s := b.Summarize(name, start, l.Phase)
		s.Notes = append(s.Notes, err.Error())
		return s, nil
	}
	s := b.Summarize(name, start, l.Phase)
	s.DrainS = round(time.Since(published).Seconds(), 2)
	return s, nil
}

func throughput(ctx context.Context, b *Bench) (Summary, error) {
	var raw RawResult
	if b.cfg.RawDuration > 0 {
		secret, err := attempt.NewSecret(rand.Reader)
		if err != nil {
			return Summary{}, err
		}
		if err := b.recv.SetSecret(rawEndpoint, secret); err != nil {
			return Summary{}, err
		}
		fmt.Fprintf(b.stderr, "hookbench: raw loop for %v with %d workers\n", b.cfg.RawDuration, b.cfg.RawWorkers)
		raw, err = Raw(ctx, RawConfig{URL: b.recv.URL(rawEndpoint), Secret: secret, Workers: b.cfg.RawWorkers,
			Duration: b.cfg.RawDuration, PayloadBytes: b.cfg.Payload, Prefix: b.runID + "_raw"})
		if err != nil {
			return Summary{}, err
		}
		fmt.Fprintf(b.stderr, "hookbench: raw loop: %.1f deliveries/s\n", raw.PerSec)
	}
	ts, err := b.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	s, err := b.publishAndAwait(ctx, "throughput", b.load(ts, 0, b.cfg.Duration, 0))
	if err != nil {
		return s, err
	}
	if raw.PerSec > 0 {
		s.RawPerSec = raw.PerSec
		s.RatioToRaw = round(s.DeliveriesPerSec/raw.PerSec, 4)
	}
	return s, nil
}

// ordering runs the throughput load twice in one run: to unordered
// endpoints, then to endpoints ordered by key with events of
// cfg.OrderingKeys keys.
func ordering(ctx context.Context, b *Bench) (Summary, error) {
	keys := b.cfg.OrderingKeys
	b.cfg.OrderingKeys = 0
	ts, err := b.makeTenants(ctx, "u")
	if err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(b.stderr, "hookbench: phase 1: unordered endpoints for %v\n", b.cfg.Duration)
	unordered, err := b.publishAndAwait(ctx, "ordering", b.load(ts, 0, b.cfg.Duration, 1))
	if err != nil {
		return unordered, err
	}
	b.cfg.OrderingKeys = keys
	if ts, err = b.makeTenants(ctx, "o"); err != nil {
		return unordered, err
	}
	fmt.Fprintf(b.stderr, "hookbench: phase 2: endpoints ordered by key, %d keys, for %v\n", keys, b.cfg.Duration)
	ordered, err := b.publishAndAwait(ctx, "ordering", b.load(ts, 0, b.cfg.Duration, 2))
	ordered.setCounts(b.Summarize("ordering", time.Time{}, 1, 2))
	addExtra(&ordered, map[string]float64{
		"unordered_deliveries_per_sec":   unordered.DeliveriesPerSec,
		"unordered_first_attempt_p99_ms": unordered.FirstAttemptP99,
	})
	if unordered.DeliveriesPerSec > 0 {
		ordered.Extra["ordered_to_unordered"] = round(ordered.DeliveriesPerSec/unordered.DeliveriesPerSec, 3)
	}
	ordered.Notes = append(ordered.Notes, "deliveries_per_sec and first_attempt_* are the ordered phase's; the counts and checks cover both phases")
	return ordered, err
}

// failingKey is the ordering key whose receiver fails in
// ordering-failure: publisher 0's first key, in every tenant.
const failingKey = "p0-k0"

// orderingFailure publishes to ordered endpoints at a fixed rate twice:
// once calm, once while one key's requests are answered 503 for
// cfg.Storm; the other keys' first-attempt p99 should hardly move.
func orderingFailure(ctx context.Context, b *Bench) (Summary, error) {
	ts, err := b.makeTenants(ctx, "o")
	if err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(b.stderr, "hookbench: phase 1: %.0f events/s to ordered endpoints for %v\n", b.cfg.Rate, b.cfg.Duration)
	if _, err := b.publishAndAwait(ctx, "ordering-failure", b.load(ts, b.cfg.Rate, b.cfg.Duration, 1)); err != nil {
		return Summary{}, err
	}
	calm := b.summarize("ordering-failure", scope{phases: []int{1}, latencyWithout: failingKey})
	fmt.Fprintf(b.stderr, "hookbench: phase 2: the same while key %s answers 503 for %v\n", failingKey, b.cfg.Storm)
	b.recv.FailKey(failingKey, time.Now().Add(b.cfg.Storm))
	if _, err := b.publishAndAwait(ctx, "ordering-failure", b.load(ts, b.cfg.Rate, b.cfg.Duration, 2)); err != nil {
		return Summary{}, err
	}
	s := b.summarize("ordering-failure", scope{phases: []int{2}, latencyWithout: failingKey})
	failing := b.summarize("ordering-failure", scope{phases: []int{2}})
	s.setCounts(b.Summarize("ordering-failure", time.Time{}, 1, 2))
	addExtra(&s, map[string]float64{
		"calm_other_keys_p99_ms":       calm.FirstAttemptP99,
		"calm_other_keys_p50_ms":       calm.FirstAttemptP50,
		"all_keys_with_failure_max_ms": failing.FirstAttemptMax,
	})
	if calm.FirstAttemptP99 > 0 {
		s.Extra["other_keys_p99_ratio"] = round(s.FirstAttemptP99/calm.FirstAttemptP99, 3)
	}
	s.Notes = append(s.Notes, "first_attempt_* are the other keys' during the failure (phase 2); the counts and checks, order included, cover both phases")
	return s, nil
}

func latency(ctx context.Context, b *Bench) (Summary, error) {
	ts, err := b.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	rate := b.cfg.Rate
	var maxPerSec float64
	if rate == 0 {
		probe := min(b.cfg.Duration/3, 10*time.Second)
		fmt.Fprintf(b.stderr, "hookbench: measuring the maximum for %v (give --rate to skip)\n", probe)
		s, err := b.publishAndAwait(ctx, "latency-probe", b.load(ts, 0, probe, 1))
		if err != nil {
			return s, err
		}
		if s.DeliveriesPerSec == 0 {
			return s, fmt.Errorf("latency: the probe measured no throughput (%v); give --rate", s.Notes)
		}
		maxPerSec = s.DeliveriesPerSec
		rate = maxPerSec / 2 / float64(b.cfg.Fanout)
		fmt.Fprintf(b.stderr, "hookbench: maximum %.0f deliveries/s; publishing %.1f events/s\n", maxPerSec, rate)
	}
	s, err := b.publishAndAwait(ctx, "latency", b.load(ts, rate, b.cfg.Duration, 2))
	addExtra(&s, map[string]float64{"rate_events_per_sec": round(rate, 2), "max_deliveries_per_sec": maxPerSec})
	return s, err
}

func fairness(ctx context.Context, b *Bench) (Summary, error) {
	tb, err := b.AddTenant(ctx, TenantSpec{Name: "b", Endpoints: b.cfg.Endpoints, Fanout: b.cfg.Fanout,
		Settings: b.cfg.settings(), Await: true})
	if err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(b.stderr, "hookbench: phase 1: tenant B alone at %.0f events/s for %v\n", b.cfg.Rate, b.cfg.Duration)
	alone, err := b.publishAndAwait(ctx, "fairness", b.load([]*Tenant{tb}, b.cfg.Rate, b.cfg.Duration, 1))
	if err != nil {
		return alone, err
	}
	hang := Behaviour{Hang: true}
	aSettings := b.cfg.settings()
	aSettings.TimeoutMs = int32(b.cfg.HangTimeout / time.Millisecond)
	ta, err := b.AddTenant(ctx, TenantSpec{Name: "a", Endpoints: b.cfg.HangEndpoints, Fanout: b.cfg.HangEndpoints,
		Behaviour: &hang, Settings: aSettings})
	if err != nil {
		return alone, err
	}
	fmt.Fprintf(b.stderr, "hookbench: phase 2: tenant A (%d hanging endpoints, %.0f events/s) beside B\n", b.cfg.HangEndpoints, b.cfg.HangRate)
	stopA := make(chan struct{})
	aDone := make(chan error, 1)
	go func() {
		la := b.load([]*Tenant{ta}, b.cfg.HangRate, b.cfg.Duration+b.cfg.Drain, 3)
		la.MaxBacklog, la.Until = 0, stopA
		_, err := b.Publish(ctx, la)
		aDone <- err
	}()
	with, err := b.publishAndAwait(ctx, "fairness", b.load([]*Tenant{tb}, b.cfg.Rate, b.cfg.Duration, 2))
	close(stopA)
	if aerr := <-aDone; aerr != nil && err == nil {
		err = fmt.Errorf("tenant A publisher: %w", aerr)
	}
	all := b.Summarize("fairness", time.Time{}, 1, 2, 3)
	with.setCounts(all)
	addExtra(&with, map[string]float64{
		"b_alone_p99_ms":                   alone.FirstAttemptP99,
		"b_alone_p50_ms":                   alone.FirstAttemptP50,
		"b_alone_from_publish_call_p99_ms": alone.Extra["from_publish_call_p99_ms"],
		"b_with_a_p99_ms":                  with.FirstAttemptP99,
		"b_with_a_p50_ms":                  with.FirstAttemptP50,
		"a_hung_attempts":                  float64(b.recv.Stats().Hung),
	})
	if alone.FirstAttemptP99 > 0 {
		with.Extra["p99_ratio_with_a"] = round(with.FirstAttemptP99/alone.FirstAttemptP99, 3)
	}
	with.Notes = append(with.Notes, "first_attempt_* are tenant B's with A present; the counts cover both phases (tenant A's deliveries are checked, not awaited)")
	return with, err
}

func retryStorm(ctx context.Context, b *Bench) (Summary, error) {
	storm := Behaviour{Mix: []StatusWeight{{Status: 429, Weight: 1}}, RetryAfter: b.cfg.RetryAfter}
	b.recv.SetDefault(storm)
	ts, err := b.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	start := time.Now()
	recovered := make(chan time.Time, 1)
	sctx, stopSwitch := context.WithCancel(ctx)
	switched := make(chan struct{})
	go func() {
		defer close(switched)
		if sleepCtx(sctx, b.cfg.Storm) == nil {
			b.recv.SetDefault(Behaviour{})
			fmt.Fprintf(b.stderr, "hookbench: the receiver answers 200 again\n")
			recovered <- time.Now()
		}
	}()
	s, err := b.publishAndAwait(ctx, "retry-storm", b.load(ts, b.cfg.Rate, b.cfg.Duration, 0))
	stopSwitch()
	<-switched
	if err != nil {
		return s, err
	}
	var lastOK time.Time
	for _, rec := range b.recv.Records() {
		if rec.FirstOK.After(lastOK) && rec.Endpoint != rawEndpoint {
			lastOK = rec.FirstOK
		}
	}
	st := b.recv.Stats()
	addExtra(&s, map[string]float64{"answers_429": float64(st.ByStatus["429"])})
	select {
	case at := <-recovered:
		s.Extra["time_to_drain_s"] = round(max(0, lastOK.Sub(at).Seconds()), 2)
	default:
		s.Notes = append(s.Notes, "everything was delivered before the storm ended: lengthen --storm or --duration")
	}
	s.DeliveriesPerSec = 0
	if s.Deliveries > 0 {
		s.DeliveriesPerSec = round(float64(s.Deliveries)/lastOK.Sub(start).Seconds(), 1)
	}
	return s, nil
}

func crash(ctx context.Context, b *Bench) (Summary, error) {
	if b.node == nil {
		return Summary{}, errors.New("crash: hookbench must start the node to kill it; drop --node")
	}
	ts, err := b.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	kills := max(b.cfg.Kills, 1)
	every := b.cfg.Duration / time.Duration(kills+1)
	start := time.Now()
	killed := make(chan error, 1)
	go func() { killed <- b.killLoop(ctx, start, every, kills) }()
	l := b.load(ts, b.cfg.Rate, b.cfg.Duration, 0)
	l.Retry = true
	if _, err := b.Publish(ctx, l); err != nil {
		return Summary{}, err
	}
	published := time.Now()
	// Kills that restarts pushed past the publishing go on while the node
	// drains.
	if err := <-killed; err != nil {
		return Summary{}, err
	}
	awaitErr := b.Await(ctx, b.cfg.Drain)
	if errors.Is(awaitErr, ErrNoDelivery) {
		return Summary{}, awaitErr
	}
	s := b.Summarize("crash", start)
	s.DrainS = round(time.Since(published).Seconds(), 2)
	if awaitErr != nil {
		s.Notes = append(s.Notes, awaitErr.Error())
	}
	addExtra(&s, map[string]float64{"kills": float64(b.node.Starts() - 1),
		"duplicate_ids": float64(b.recv.Stats().DuplicateIDs)})
	return s, nil
}

// killLoop kills the node with SIGKILL at start + i·every (and at least
// minUp after it came back), restarts it on the same data directory and
// points the API at it, kills times.
func (b *Bench) killLoop(ctx context.Context, start time.Time, every time.Duration, kills int) error {
	const minUp = time.Second // let the node do some work between kills
	up := time.Now()
	for i := 1; i <= kills; i++ {
		at := start.Add(time.Duration(i) * every)
		if next := up.Add(minUp); at.Before(next) {
			at = next
		}
		if err := sleepCtx(ctx, time.Until(at)); err != nil {
			return err
		}
		killed := time.Now()
		if err := b.node.Kill(); err != nil {
			return err
		}
		fmt.Fprintf(b.stderr, "hookbench: kill -9 %d of %d; restarting on the same data\n", i, kills)
		if err := b.node.Restart(ctx); err != nil {
			return fmt.Errorf("restart after kill %d: %w", i, err)
		}
		b.ledger.disturbed("kill", killed, time.Now())
		if err := b.api.Reconnect(b.node.GRPCAddr()); err != nil {
			return err
		}
		up = time.Now()
	}
	return nil
}

// addExtra adds scenario figures to a summary.
func addExtra(s *Summary, m map[string]float64) {
	if s.Extra == nil {
		s.Extra = map[string]float64{}
	}
	for k, v := range m {
		s.Extra[k] = v
	}
}
