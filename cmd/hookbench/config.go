package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/hookline/hookline/faults"
)

// RunConfig configures `hookbench run`. A zero field takes the scenario's
// default (see scenarios), then the general default named on its flag.
type RunConfig struct {
	Scenario string

	Node     string // gRPC address of a running node; empty starts one
	Token    string // the node's admin token
	Hookline string // hookline binary; empty builds cmd/hookline
	NodeLog  bool   // copy the node's log to stderr
	SlowOut  string // rolling, scale-out: write the slow first attempts of the change here
	KeepData bool   // keep the node's data directory
	// ReceiverLatency is how long the receiver takes to answer every
	// request (it records the request's arrival first): receivers that are
	// slow to answer, as real ones are. 0 answers at once.
	ReceiverLatency time.Duration
	// NodeFaults is given to every node hookbench starts as `hookline
	// serve --faults` (package faults), for the whole run.
	NodeFaults string

	Duration   time.Duration // publishing time
	Rate       float64       // events per second; 0 is as fast as accepted
	Tenants    int
	Endpoints  int // per tenant
	Fanout     int // endpoints per event
	Publishers int
	Batch      int
	Payload    int   // bytes
	MaxBacklog int64 // planned − received above which publishing pauses

	RawDuration time.Duration
	RawWorkers  int

	Drain         time.Duration // wait for the deliveries after publishing
	FirstDelivery time.Duration // give up when nothing arrives this long
	Progress      time.Duration

	EndpointRate     float64 // endpoint rate_per_second (and burst)
	EndpointInFlight int     // endpoint max_in_flight
	// OrderingKeys, above 0, makes every endpoint order by key and gives
	// every event one of this many ordering keys, shared out among the
	// publishers; the receiver checks each key's order.
	OrderingKeys int
	// FailKey, with OrderingKeys, answers every request of one key
	// (failingKey) 503 for this long from the start of publishing.
	FailKey time.Duration

	PG    string // cluster: PostgreSQL URL of the shared log
	Nodes int    // cluster, rolling, scale-out, acceptance --pg: nodes started
	// History is the deliveries published and delivered before the
	// measured run (cluster, rolling, scale-out); negative means the
	// scenario's default.
	History int64
	// Standbys is given to every node of a cluster as `serve --standbys`;
	// "" gives none (the node's default).
	Standbys string
	KillAt   time.Duration // cluster: publishing time before the first SIGKILL
	Rounds   int           // cluster-scale: rounds of the three sizes

	Kills int // crash, cluster, acceptance, brokers
	// BrokerDeliveries is the deliveries of each broker phase with kills
	// (brokers).
	BrokerDeliveries int64
	Storm            time.Duration // retry-storm: 429s for this long
	RetryAfter       time.Duration // retry-storm: Retry-After sent
	HangEndpoints    int           // fairness: tenant A's endpoints
	HangRate         float64       // fairness: tenant A's events per second
	HangTimeout      time.Duration // fairness: tenant A's attempt timeout

	// Seed chooses the chaos run's schedule; ScheduleOnly prints it and
	// runs nothing.
	Seed         int64
	ScheduleOnly bool

	Only       []string // acceptance: the faults to run (empty: all)
	PGRestarts int      // acceptance --pg private: restarts of the pg-restart fault
}

// failKeyDrain is added to --fail-key for the default --drain.
const failKeyDrain = 3 * time.Minute

// withDefaults fills zero fields from d, then from the general defaults.
func (c RunConfig) withDefaults(d RunConfig) RunConfig {
	fill := func(v *int, sd, def int) { setDefault(v, sd); setDefault(v, def) }
	fillD := func(v *time.Duration, sd, def time.Duration) { setDefault(v, sd); setDefault(v, def) }
	fillF := func(v *float64, sd float64) { setDefault(v, sd) }
	fillD(&c.Duration, d.Duration, 30*time.Second)
	fillF(&c.Rate, d.Rate)
	fill(&c.Tenants, d.Tenants, 1)
	fill(&c.Endpoints, d.Endpoints, 10)
	fill(&c.Fanout, d.Fanout, 4)
	fill(&c.Publishers, d.Publishers, 8)
	fill(&c.Batch, d.Batch, 50)
	fill(&c.Payload, d.Payload, 1536)
	setDefault(&c.MaxBacklog, d.MaxBacklog)
	fillD(&c.RawDuration, d.RawDuration, 10*time.Second)
	fill(&c.RawWorkers, d.RawWorkers, 64)
	if c.Drain == 0 && c.FailKey > 0 {
		// The failing key's head is retried on the delivery schedule: 5 s
		// doubling with full jitter, so after the failures of FailKey its
		// next attempt may be minutes away, and its key waits for it.
		c.Drain = c.FailKey + failKeyDrain
	}
	fillD(&c.Drain, d.Drain, 90*time.Second)
	fillD(&c.FirstDelivery, d.FirstDelivery, 30*time.Second)
	fillD(&c.Progress, d.Progress, 5*time.Second)
	fillF(&c.EndpointRate, d.EndpointRate)
	fill(&c.EndpointInFlight, d.EndpointInFlight, 0)
	fill(&c.Nodes, d.Nodes, 3)
	if c.History < 0 {
		c.History = max(d.History, 0)
	}
	fill(&c.PGRestarts, d.PGRestarts, 1)
	setDefault(&c.Seed, d.Seed)
	fillD(&c.KillAt, d.KillAt, c.Duration/2)
	fill(&c.Kills, d.Kills, 6)
	setDefault(&c.BrokerDeliveries, d.BrokerDeliveries)
	fill(&c.Rounds, d.Rounds, 1)
	fillD(&c.Storm, d.Storm, 20*time.Second)
	fillD(&c.RetryAfter, d.RetryAfter, 5*time.Second)
	fill(&c.HangEndpoints, d.HangEndpoints, 500)
	setDefault(&c.OrderingKeys, d.OrderingKeys)
	fillF(&c.HangRate, d.HangRate)
	fillD(&c.HangTimeout, d.HangTimeout, 5*time.Second)
	return c
}

// Validate reports a configuration that cannot run, naming the flag.
func (c RunConfig) Validate() error {
	if _, ok := scenarios[c.Scenario]; !ok {
		return fmt.Errorf("run: unknown scenario %q; use one of %s", c.Scenario, scenarioNames())
	}
	switch {
	case c.Fanout > c.Endpoints:
		return fmt.Errorf("--fanout %d is more than --endpoints %d", c.Fanout, c.Endpoints)
	case c.Batch > 100:
		return fmt.Errorf("--batch %d: the node takes at most 100 events per PublishBatch", c.Batch)
	case c.FailKey != 0 && (c.OrderingKeys == 0 || c.FailKey < 0):
		return fmt.Errorf("--fail-key %v needs --ordering-keys and a positive duration", c.FailKey)
	case c.OrderingKeys < 0:
		return fmt.Errorf("--ordering-keys %d is negative", c.OrderingKeys)
	case c.OrderingKeys > 0 && c.OrderingKeys/max(c.Publishers, 1) < c.Batch:
		return fmt.Errorf("--ordering-keys %d gives each of the %d publishers %d keys, fewer than --batch %d: a batch must not carry a key twice (the bench knows a key's order only between batches); give more keys or a smaller batch",
			c.OrderingKeys, c.Publishers, c.OrderingKeys/c.Publishers, c.Batch)
	case c.ReceiverLatency < 0 || c.ReceiverLatency > 10*time.Second:
		return fmt.Errorf("--receiver-latency %v: give 0 to 10s (the attempts' timeout is longer)", c.ReceiverLatency)
	case c.Rate < 0 || c.EndpointRate < 0 || c.HangRate < 0:
		return errors.New("--rate, --endpoint-rate and --hang-rate must not be negative")
	case c.Node != "" && c.Token == "":
		return errors.New("--node needs --token (the node's HOOKLINE_ADMIN_TOKEN) to create tenants")
	case c.Scenario == "acceptance" && c.Node != "":
		return errors.New("acceptance starts (and kills) its own nodes: drop --node")
	case (c.Scenario == "crash" || c.Scenario == "brokers") && c.Node != "":
		return fmt.Errorf("%s kills the node, so hookbench must start it: drop --node", c.Scenario)
	case c.Scenario == "brokers" && c.BrokerDeliveries < int64(c.Fanout):
		return fmt.Errorf("--broker-deliveries %d: give at least --fanout (%d), one event's deliveries", c.BrokerDeliveries, c.Fanout)
	case scenarios[c.Scenario].cluster && c.Node != "":
		return fmt.Errorf("%s starts its own nodes: drop --node", c.Scenario)
	case scenarios[c.Scenario].cluster && c.PG == "":
		return fmt.Errorf("%w: give --pg postgres://… or set HOOKLINE_POSTGRES_URL (source /var/tmp/hookline-postgres/env)", ErrNoPostgres)
	case c.Scenario == "cluster" && c.KillAt >= c.Duration:
		return fmt.Errorf("--kill-at %v must come before the end of --duration %v", c.KillAt, c.Duration)
	case c.Scenario == "crash" && c.Kills < 5:
		return fmt.Errorf("--kills %d: the crash scenario needs at least 5", c.Kills)
	case c.Scenario == "cluster" && (c.Nodes < 2 || c.Kills < 1):
		return fmt.Errorf("--nodes %d, --kills %d: the cluster scenario kills one node at a time and needs at least 2 nodes and 1 kill", c.Nodes, c.Kills)
	case c.Scenario == "rolling" && c.Nodes < 2:
		return fmt.Errorf("--nodes %d: a rolling restart needs at least 2 nodes, so that one serves while another restarts", c.Nodes)
	case c.Nodes < 1:
		return fmt.Errorf("--nodes %d: give at least 1", c.Nodes)
	case c.Scenario == "chaos" && c.Node != "":
		return errors.New("chaos starts, kills and rebuilds its own nodes: drop --node")
	case c.Scenario == "chaos" && c.Duration < 10*time.Second:
		return fmt.Errorf("--duration %v: a chaos run needs at least 10s", c.Duration)
	case c.ScheduleOnly && c.Scenario != "chaos":
		return errors.New("--schedule-only is the chaos run's: drop it")
	case c.Standbys != "" && c.Standbys != "0" && c.Standbys != "1" && c.Standbys != "2":
		return fmt.Errorf("--standbys %q: give 0, 1 or 2 (or nothing: the node's default)", c.Standbys)
	case c.NodeFaults != "" && c.Node != "":
		return errors.New("--node-faults is given to the nodes hookbench starts: drop --node")
	}
	if _, err := faults.Parse(c.NodeFaults); err != nil {
		return fmt.Errorf("--node-faults: %w", err)
	}
	return nil
}

// view is the configuration a summary prints under "config": the settings
// every scenario uses and own, the scenario's (scenario.config), without
// the zero ones, durations as text. Addresses and URLs are left out.
func (c RunConfig) view(own []string) map[string]any {
	d := func(v time.Duration) any {
		if v == 0 {
			return nil
		}
		return v.String()
	}
	n := func(v int64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	f := func(v float64) any {
		if v == 0 {
			return nil
		}
		return v
	}
	pg := any(nil)
	switch {
	case c.PG == "private":
		pg = "private"
	case c.PG != "":
		pg = "given"
	}
	all := map[string]any{
		"duration": d(c.Duration), "rate": f(c.Rate), "tenants": n(int64(c.Tenants)), "endpoints": n(int64(c.Endpoints)),
		"fanout": n(int64(c.Fanout)), "publishers": n(int64(c.Publishers)), "batch": n(int64(c.Batch)), "payload_bytes": n(int64(c.Payload)),
		"max_backlog": n(c.MaxBacklog), "endpoint_rate": f(c.EndpointRate), "endpoint_in_flight": n(int64(c.EndpointInFlight)),
		"drain": d(c.Drain), "raw_duration": d(c.RawDuration), "raw_workers": n(int64(c.RawWorkers)),
		"nodes": n(int64(c.Nodes)), "kills": n(int64(c.Kills)), "kill_at": d(c.KillAt), "rounds": n(int64(c.Rounds)),
		"storm": d(c.Storm), "retry_after": d(c.RetryAfter), "hang_endpoints": n(int64(c.HangEndpoints)),
		"hang_rate": f(c.HangRate), "hang_timeout": d(c.HangTimeout), "pg": pg, "pg_restarts": n(int64(c.PGRestarts)),
		"history": n(c.History), "broker_deliveries": n(c.BrokerDeliveries),
	}
	if c.ReceiverLatency > 0 {
		all["receiver_latency"] = d(c.ReceiverLatency)
	}
	if c.OrderingKeys > 0 {
		all["ordering_keys"] = n(int64(c.OrderingKeys))
	}
	if c.FailKey > 0 {
		all["fail_key"] = d(c.FailKey)
	}
	if c.NodeFaults != "" {
		all["node_faults"] = c.NodeFaults
	}
	if c.Standbys != "" {
		all["standbys"] = c.Standbys
	}
	if len(c.Only) > 0 {
		all["only"] = strings.Join(c.Only, ",")
	}
	if c.Node != "" {
		all["node"] = "given"
	}
	if c.Seed != 0 {
		all["seed"] = c.Seed
	}
	keys := append([]string{"duration", "rate", "tenants", "endpoints", "fanout", "publishers", "batch", "payload_bytes",
		"max_backlog", "endpoint_rate", "endpoint_in_flight", "drain", "node_faults", "node", "ordering_keys", "fail_key"}, own...)
	out := map[string]any{}
	for _, k := range keys {
		if v := all[k]; v != nil {
			out[k] = v
		}
	}
	return out
}

// parseRun parses `hookbench run SCENARIO [flags]` (flags before or after
// the scenario).
func parseRun(args []string, stderr io.Writer) (RunConfig, error) {
	var c RunConfig
	fs := flag.NewFlagSet("hookbench run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: hookbench run SCENARIO [flags]\n\nScenarios:\n")
		for _, n := range sortedKeys(scenarios) {
			fmt.Fprintf(stderr, "  %-12s %s\n", n, scenarios[n].summary)
		}
		fmt.Fprintf(stderr, "\nFlags (0 means the scenario's default):\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Node, "node", "", "gRPC address of a running node (started with --allow-private-targets); empty starts one")
	fs.StringVar(&c.Token, "token", os.Getenv("HOOKLINE_ADMIN_TOKEN"), "the node's admin token (HOOKLINE_ADMIN_TOKEN); with --node")
	fs.StringVar(&c.Hookline, "hookline", "", "hookline binary to start; empty builds cmd/hookline with go build")
	fs.BoolVar(&c.NodeLog, "node-log", false, "copy the node's log to stderr")
	fs.StringVar(&c.SlowOut, "slow-out", "", "rolling, scale-out: write each first attempt of the change slower than twice the steady p99 to this file (second of its publish's answer, delay, endpoint, then where the delay went as its first attempt records it: to the plan, to the start, the send, and its waits once ready; tab-separated)")
	fs.BoolVar(&c.KeepData, "keep-data", false, "keep the node's data directory and print where it is")
	fs.StringVar(&c.NodeFaults, "node-faults", "", "give every node hookbench starts these faults for the whole run (hookline serve --faults, package faults), e.g. plan-short=1000 or corrupt-body=1000: the run must then fail")
	fs.DurationVar(&c.Duration, "duration", 0, "publishing time (default per scenario: 30s, fairness 20s per phase, retry-storm 10s, crash 60s, cluster 40s, cluster-scale 20s per cluster size)")
	fs.Float64Var(&c.Rate, "rate", 0, "events per second (0: as fast as accepted; latency: half the measured maximum)")
	fs.IntVar(&c.Tenants, "tenants", 0, "tenants (throughput and latency 10, retry-storm and crash 4)")
	fs.IntVar(&c.Endpoints, "endpoints", 0, "endpoints per tenant (10)")
	fs.IntVar(&c.Fanout, "fanout", 0, "endpoints each event goes to (4)")
	fs.IntVar(&c.Publishers, "publishers", 0, "concurrent publishers (8)")
	fs.IntVar(&c.Batch, "batch", 0, "events per PublishBatch, at most 100 (50)")
	fs.IntVar(&c.Payload, "payload", 0, "payload bytes (1536)")
	fs.Int64Var(&c.MaxBacklog, "max-backlog", 0, "pause publishing while this many deliveries are planned and not received (throughput, latency 20000; 0 elsewhere: no bound)")
	fs.DurationVar(&c.RawDuration, "raw-duration", 0, "throughput: raw loop time before the Hookline run (10s; negative skips it)")
	fs.IntVar(&c.RawWorkers, "raw-workers", 0, "throughput: raw loop senders (64)")
	fs.DurationVar(&c.Drain, "drain", 0, "wait at most this long for the deliveries after publishing (90s; fairness 60s; with --fail-key, the failing time plus 3m: its key waits for its head's retry)")
	fs.DurationVar(&c.FirstDelivery, "first-delivery", 0, "give up when nothing is delivered this long after the first publish (30s)")
	fs.DurationVar(&c.Progress, "progress", 0, "progress line interval on stderr (5s)")
	fs.Float64Var(&c.EndpointRate, "endpoint-rate", 0, "endpoints' rate_per_second and burst (throughput, latency 1000; 0: the node's default)")
	fs.IntVar(&c.OrderingKeys, "ordering-keys", 0, "events carry one of this many ordering keys (shared out among the publishers) and every endpoint orders by key; the receiver checks each key's order (ordering: 1000)")
	fs.DurationVar(&c.FailKey, "fail-key", 0, "with --ordering-keys: answer every request of ordering key "+failingKey+" 503 for this long from the start of publishing (its later events wait, in order)")
	fs.IntVar(&c.EndpointInFlight, "endpoint-in-flight", 0, "endpoints' max_in_flight (throughput, latency 50; 0: the node's default)")
	fs.StringVar(&c.PG, "pg", os.Getenv("HOOKLINE_POSTGRES_URL"), "cluster, cluster-scale: PostgreSQL URL of the shared log (HOOKLINE_POSTGRES_URL); a fresh schema per run, dropped at the end. acceptance: three nodes on PostgreSQL: \"private\" starts a server of its own (initdb, another port) that the pg-restart fault restarts; a URL uses that server (no pg-restart)")
	fs.IntVar(&c.Nodes, "nodes", 0, "cluster, rolling, acceptance --pg: nodes to start (3); scale-out: nodes before the one that joins (2)")
	fs.Int64Var(&c.History, "history", -1, "cluster, rolling, scale-out: deliveries published and delivered before the measured run, as fast as accepted (cluster 0, rolling and scale-out 300000)")
	fs.StringVar(&c.Standbys, "standbys", "", "cluster scenarios: give every node serve --standbys N (0, 1 or 2); empty gives none (the node's default)")
	fs.DurationVar(&c.KillAt, "kill-at", 0, "cluster: kill -9 the first node after this much publishing (half of --duration); further --kills follow at even intervals")
	fs.IntVar(&c.Kills, "kills", 0, "crash: kill -9 this many times, at least 5 (6); cluster: kill -9 this many times, one node at a time, each restarted before the next kill (1); acceptance: kills per killing fault (3); brokers: kills in each broker phase (2)")
	fs.Int64Var(&c.BrokerDeliveries, "broker-deliveries", 0, "brokers: deliveries of each broker phase with kills (10000)")
	fs.IntVar(&c.Rounds, "rounds", 0, "cluster-scale: rounds of 1, 2 and 3 nodes, in alternating order; figures are medians (3: one round always runs three nodes last); flood: rounds of its phases (1)")
	fs.DurationVar(&c.Storm, "storm", 0, "retry-storm: answer 429 for this long (20s)")
	fs.DurationVar(&c.RetryAfter, "retry-after", 0, "retry-storm: Retry-After sent with the 429s (5s)")
	fs.IntVar(&c.HangEndpoints, "hang-endpoints", 0, "fairness: tenant A's hanging endpoints (500)")
	fs.Float64Var(&c.HangRate, "hang-rate", 0, "fairness: tenant A's events per second, each to every A endpoint (2)")
	fs.DurationVar(&c.HangTimeout, "hang-timeout", 0, "fairness: tenant A's attempt timeout, 1s to 30s (5s)")
	fs.DurationVar(&c.ReceiverLatency, "receiver-latency", 0, "the receiver answers every request this long after it arrived (arrivals are what first attempts are timed by), as a slow receiver does; 0 to 10s (0)")
	fs.IntVar(&c.PGRestarts, "pg-restarts", 0, "acceptance --pg private: times the pg-restart fault restarts PostgreSQL (immediate shutdown), spread over --duration (1)")
	fs.Int64Var(&c.Seed, "seed", 0, "chaos: the seed of the schedule: the same seed, --duration and --nodes play the same schedule (1)")
	fs.BoolVar(&c.ScheduleOnly, "schedule-only", false, "chaos: print the schedule of --seed and run nothing")
	only := fs.String("only", "", "acceptance: run only these faults, comma-separated (the baseline always runs): "+strings.Join(faultNames(), ", "))

	// The scenario may come first or after the flags.
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		c.Scenario, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	pgGiven := false
	fs.Visit(func(f *flag.Flag) { pgGiven = pgGiven || f.Name == "pg" })
	if c.Scenario == "" && fs.NArg() > 0 {
		c.Scenario = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return c, fmt.Errorf("run: unexpected argument %q", fs.Arg(0))
	}
	for _, f := range strings.Split(*only, ",") {
		if f = strings.TrimSpace(f); f != "" {
			if !slices.Contains(faultNames(), f) {
				return c, fmt.Errorf("--only: unknown fault %q; use %s", f, strings.Join(faultNames(), ", "))
			}
			c.Only = append(c.Only, f)
		}
	}
	if c.Scenario == "" {
		fs.Usage()
		return c, fmt.Errorf("run: name a scenario: %s", scenarioNames())
	}
	sc, ok := scenarios[c.Scenario]
	if !ok {
		return c, fmt.Errorf("run: unknown scenario %q; use one of %s", c.Scenario, scenarioNames())
	}
	if c.Scenario == "acceptance" && !pgGiven {
		c.PG = "" // one node unless --pg is given: HOOKLINE_POSTGRES_URL alone does not make a cluster
	}
	skipRaw := c.RawDuration < 0
	c = c.withDefaults(sc.defaults)
	if skipRaw {
		c.RawDuration = 0
	}
	return c, c.Validate()
}
