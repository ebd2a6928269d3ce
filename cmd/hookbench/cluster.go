package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrNoPostgres reports a cluster scenario run without a PostgreSQL URL:
// the nodes of a cluster share one log.
var ErrNoPostgres = errors.New("hookbench: the cluster scenarios need a PostgreSQL log")

// ClusterConfig says how to start a cluster.
type ClusterConfig struct {
	// Nodes is the number of `hookline serve` processes. Required (>= 1).
	Nodes int
	// DSN is the PostgreSQL URL of the shared log. Required.
	DSN string
	// Binary is the hookline executable. Required (see BuildNode).
	Binary string
	// Log, when set, receives every node's log lines.
	Log io.Writer
	// KeepData keeps the schema and the data directories.
	KeepData bool
	// Args are added to every node's serve command line.
	Args []string
}

// Cluster is a set of `hookline serve` processes on one PostgreSQL log, in
// a schema of its own, joined into one cluster through the first node's
// gossip address. The nodes share a master key and an admin token; each has
// its own data directory (projections). Create it with StartCluster; Close
// stops the nodes and drops the schema. Its fields are set at start; Join
// appends to Nodes and APIs, so a goroutine other than Join's caller reads
// them before or after a Join, never during.
type Cluster struct {
	Nodes  []*Node
	APIs   []*API // APIs[i] talks to Nodes[i]
	Token  string
	Schema string

	cfg ClusterConfig
	dir string
	env []string // every node's environment: the master key
}

// StartCluster starts cfg.Nodes nodes one after another, the first on its
// own and the others joining it, and dials each one's control API. On error
// it stops what it started.
func StartCluster(ctx context.Context, cfg ClusterConfig) (_ *Cluster, err error) {
	if cfg.Nodes < 1 || cfg.DSN == "" || cfg.Binary == "" {
		return nil, errors.New("start cluster: Nodes >= 1, DSN and Binary are required")
	}
	dir, err := os.MkdirTemp("", "hookbench-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{cfg: cfg, dir: dir, Schema: "hb_" + randomHex(6), Token: "hb_" + randomHex(16)}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close(context.WithoutCancel(ctx)))
		}
	}()
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails
	c.env = []string{"HOOKLINE_MASTER_KEY=" + base64.StdEncoding.EncodeToString(key)}
	for i := range cfg.Nodes {
		if err := c.start(ctx); err != nil {
			return nil, fmt.Errorf("start node %d of %d: %w", i+1, cfg.Nodes, err)
		}
	}
	if err := c.waitSettled(ctx, time.Minute); err != nil {
		return nil, err
	}
	return c, nil
}

// args are node i's serve arguments: the log, and a member to join (none
// for a cluster's first node).
func (c *Cluster) args(join string) []string {
	args := []string{"--store", c.cfg.DSN, "--store-schema", c.Schema}
	if join != "" {
		args = append(args, "--join", join)
	}
	return append(args, c.cfg.Args...)
}

// start starts one more node, joining the first, and dials it.
func (c *Cluster) start(ctx context.Context) error {
	i, join := len(c.Nodes), ""
	if i > 0 {
		join = c.Nodes[0].GossipAddr()
	}
	n, err := StartNode(ctx, NodeConfig{Binary: c.cfg.Binary, DataDir: filepath.Join(c.dir, "node"+strconv.Itoa(i)),
		AdminToken: c.Token, Log: c.cfg.Log, Args: c.args(join), Env: c.env})
	if err != nil {
		return err
	}
	c.Nodes = append(c.Nodes, n)
	if n.GossipAddr() == "" {
		return fmt.Errorf("node %d serves but logged no \"cluster node started\" line with its gossip address:\n%s", i+1, n.Tail())
	}
	api, err := Dial(n.GRPCAddr(), c.Token)
	if err != nil {
		return err
	}
	c.APIs = append(c.APIs, api)
	return nil
}

// Join starts one more node, which joins the cluster (scale-out), and
// returns its API. It does not wait for the partitions to move (see
// waitSettled).
func (c *Cluster) Join(ctx context.Context) (*API, error) {
	if err := c.start(ctx); err != nil {
		return nil, fmt.Errorf("join node %d: %w", len(c.Nodes)+1, err)
	}
	return c.APIs[len(c.APIs)-1], nil
}

// Roll stops node i with SIGTERM (SIGKILL after timeout) and starts it
// again on its data, joining another member, and points its API at it
// once it says it is serving, as a load balancer with a readiness probe
// would (until then the calls for it go to the others): one step of a
// rolling restart. It does not wait for the partitions to come back (see
// waitSettled).
func (c *Cluster) Roll(ctx context.Context, i int, timeout time.Duration) error {
	join := c.Nodes[(i+1)%len(c.Nodes)].GossipAddr()
	if err := c.Nodes[i].RestartWith(ctx, timeout, c.args(join)); err != nil {
		return fmt.Errorf("restart node %d: %w", i+1, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := WaitServing(wctx, c.Nodes[i].GRPCAddr()); err != nil {
		return fmt.Errorf("restart node %d: %w", i+1, err)
	}
	return c.APIs[i].Reconnect(c.Nodes[i].GRPCAddr())
}

// waitSettled waits until the nodes share the delivery partitions again:
// every node serves some, each has all it follows live (caught up) and its
// projections within 2 s of the log's head, and together they serve every
// partition. A member that came back takes its partitions back once it is
// near the log's head, so this waits for that hand-back too; a load
// started before that lands for a while on the first node alone. It
// scrapes each node once per settlePoll: a scrape costs the node CPU.
func (c *Cluster) waitSettled(ctx context.Context, within time.Duration) error {
	const settledLag = 2 * time.Second // near the log's head: a member takes partitions only then
	deadline := time.Now().Add(within)
	names := []string{"hookline_partitions_owned", "hookline_partitions_live", "hookline_partitions_served",
		"hookline_projection_lag_seconds", "hookline_projection_records_total"}
	for {
		served, settled, last, old := 0.0, true, "", false
		for i, n := range c.Nodes {
			m, err := n.Metrics(ctx, names...)
			s, hasServed := m["hookline_partitions_served"]
			if !hasServed {
				// A build before the gauge: its followed partitions, live,
				// stand in (more than 256 with standbys).
				s = m["hookline_partitions_live"]
			}
			if err == nil && len(m) < len(names)-1 {
				err = fmt.Errorf("%d of the %d series it needs", len(m), len(names))
			}
			if err != nil {
				settled, last = false, fmt.Sprintf("node %d: metrics: %v", i+1, err)
				continue
			}
			if !hasServed {
				old = true
			}
			owned, l := m["hookline_partitions_owned"], m["hookline_partitions_live"]
			lag, applied := m["hookline_projection_lag_seconds"], m["hookline_projection_records_total"]
			switch {
			case owned == 0 || l != owned:
				settled, last = false, fmt.Sprintf("node %d follows %.0f partitions, %.0f live", i+1, owned, l)
			case s == 0:
				settled, last = false, fmt.Sprintf("node %d serves no partition yet", i+1)
			case applied == 0 || lag < 0 || lag > settledLag.Seconds():
				// Live partitions of a member still replaying the log are
				// live only up to its own position, far behind; one that
				// applied nothing yet has no lag to tell.
				settled, last = false, fmt.Sprintf("node %d's projections are %.1f s behind the log (%.0f records applied)", i+1, lag, applied)
			}
			served += s
		}
		if settled && (served == 256 || old && served >= 256) {
			return nil
		}
		if served != 256 && last == "" {
			last = fmt.Sprintf("%.0f of 256 partitions served", served)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the %d nodes did not share the partitions within %v: %s", len(c.Nodes), within, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(settlePoll):
		}
	}
}

// settlePoll is how often waitSettled scrapes the nodes.
const settlePoll = 250 * time.Millisecond

// Usage sums the CPU of every node and gives the highest peak RSS.
func (c *Cluster) Usage() (Usage, error) {
	var all Usage
	var errs []error
	for _, n := range c.Nodes {
		u, err := n.Usage()
		errs = append(errs, err)
		all.CPU += u.CPU
		all.PeakRSS = max(all.PeakRSS, u.PeakRSS)
	}
	return all, errors.Join(errs...)
}

// AwaitProjections waits until every node's projections have applied the
// log to its end (hookline_projection_lag_seconds 0), at most timeout: a
// node hands new plans to its endpoint grains before its projections apply
// them, so the receiver can have every delivery while the projections
// still catch up.
func (c *Cluster) AwaitProjections(ctx context.Context, timeout time.Duration) error {
	var behind []string
	err := poll(ctx, timeout, func() (bool, error) {
		behind = behind[:0]
		for i, n := range c.Nodes {
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			lag, ok, err := n.Metric(mctx, "hookline_projection_lag_seconds")
			cancel()
			if err != nil || !ok || lag != 0 {
				behind = append(behind, fmt.Sprintf("node %d (lag %.1f s, %v)", i, lag, err))
			}
		}
		return len(behind) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("projections not caught up: %s: %w", strings.Join(behind, ", "), err)
	}
	return nil
}

// Stop stops every node at once (SIGTERM, then SIGKILL after timeout),
// keeping their data.
func (c *Cluster) Stop(timeout time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(c.Nodes))
	for i, n := range c.Nodes {
		wg.Go(func() { errs[i] = n.Stop(timeout) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Close stops every node at once (SIGTERM, then SIGKILL after 30 s), drops
// the schema and removes the data directories, unless KeepData.
func (c *Cluster) Close(ctx context.Context) error {
	for _, a := range c.APIs {
		a.Close()
	}
	errs := []error{c.Stop(30 * time.Second)}
	if c.cfg.KeepData {
		return errors.Join(errors.Join(errs...), fmt.Errorf("kept schema %s and data in %s (--keep-data)", c.Schema, c.dir))
	}
	errs = append(errs, os.RemoveAll(c.dir), dropSchema(ctx, c.cfg.DSN, c.Schema))
	return errors.Join(errs...)
}

func dropSchema(ctx context.Context, dsn, schema string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("drop schema %s: %w", schema, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// startCluster builds the binary when needed (into a directory removed by
// the returned cleanup with the cluster) and starts a cluster of n nodes.
func (b *Bench) startCluster(ctx context.Context, n int) (*Cluster, func(), error) {
	bin, err := b.hooklineBinary(ctx)
	if err != nil {
		return nil, nil, err
	}
	cfg := ClusterConfig{Nodes: n, DSN: b.cfg.PG, Binary: bin, KeepData: b.cfg.KeepData, Args: b.cfg.clusterArgs()}
	if b.cfg.NodeLog {
		cfg.Log = b.stderr
	}
	fmt.Fprintf(b.stderr, "hookbench: starting %d node(s) on PostgreSQL\n", n)
	started := time.Now()
	c, err := StartCluster(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	fmt.Fprintf(b.stderr, "hookbench: %d node(s) serving in %v, schema %s\n", n, time.Since(started).Round(time.Millisecond), c.Schema)
	return c, func() {
		if err := c.Close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(b.stderr, "hookbench: %v\n", err)
		}
	}, nil
}

// buildOnce guards the binary built for the cluster scenarios of a run.
var buildOnce struct {
	sync.Mutex // guards the fields below
	bin        string
}

// hooklineBinary returns --hookline, or builds cmd/hookline once per
// process into a temporary directory left for the process's later runs.
func (b *Bench) hooklineBinary(ctx context.Context) (string, error) {
	if b.cfg.Hookline != "" {
		return b.cfg.Hookline, nil
	}
	buildOnce.Lock()
	defer buildOnce.Unlock()
	if buildOnce.bin != "" {
		return buildOnce.bin, nil
	}
	dir, err := os.MkdirTemp("", "hookbench-bin-")
	if err != nil {
		return "", err
	}
	fmt.Fprintf(b.stderr, "hookbench: building cmd/hookline (--hookline skips this)\n")
	if buildOnce.bin, err = BuildNode(ctx, dir); err != nil {
		os.RemoveAll(dir)
	}
	return buildOnce.bin, err
}

// withProgress runs b.Progress until the returned stop is called.
func (b *Bench) withProgress(ctx context.Context) (stop func()) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Progress(pctx, b.cfg.Progress)
	}()
	return func() { cancel(); <-done }
}

// clusterFigures confirms the node's counts through b.api and fills the
// CPU, memory and disk figures of the cluster's nodes, and how the
// projection work was shared: projection_records is every node's records
// applied (summed), max_projection_share the largest node's fraction of
// them, and disk_bytes_per_delivery the nodes' data directories summed
// (projections; the log is in PostgreSQL, log_bytes_per_delivery).
func (b *Bench) clusterFigures(ctx context.Context, c *Cluster, s *Summary) {
	entered, enteredErr := c.Usage()
	confirmFor := 30 * time.Second
	if s.Lost != 0 {
		confirmFor = 0
	}
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	if err := b.Confirm(cctx, s, confirmFor); err != nil {
		s.Notes = append(s.Notes, "the node's counts do not match: "+err.Error())
	}
	cancel()
	confirmed, confirmedErr := c.Usage()
	var records, top float64
	for _, n := range c.Nodes {
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		r, ok, err := n.Metric(mctx, "hookline_projection_records_total")
		cancel()
		if err != nil || !ok {
			s.Notes = append(s.Notes, fmt.Sprintf("projection records of a node: %v (exported: %v)", err, ok))
		}
		records, top = records+r, max(top, r)
	}
	// Stop the nodes (SIGTERM: each flushes its projections, which keep no
	// write-ahead log), so the disk figure is what the run leaves on disk.
	if err := c.Stop(30 * time.Second); err != nil {
		s.Notes = append(s.Notes, err.Error())
	}
	u, err := c.Usage()
	if err != nil {
		s.Notes = append(s.Notes, err.Error())
	}
	_, all := b.ledger.expected()
	if all > 0 {
		s.CPUSecPer1k = round(u.CPU.Seconds()/float64(all)*1000, 4)
	}
	if err == nil && confirmedErr == nil && enteredErr == nil {
		// Where the fixed costs go: the CPU of the confirmation (paging
		// the deliveries' history), and of the stop (flushing).
		addExtra(s, map[string]float64{"confirm_cpu_s": round((confirmed.CPU - entered.CPU).Seconds(), 2),
			"stop_cpu_s": round((u.CPU - confirmed.CPU).Seconds(), 2)})
	}
	s.PeakRSSMB = round(float64(u.PeakRSS)/(1<<20), 1)
	var disk, tables int64
	for _, n := range c.Nodes {
		size, t, err := dirSizes(n.DataDir())
		if err != nil {
			s.Notes = append(s.Notes, fmt.Sprintf("data directory size: %v", err))
		}
		disk, tables = disk+size, tables+t
	}
	extra := map[string]float64{"projection_records": records}
	if all > 0 {
		extra["disk_table_bytes_per_delivery"] = round(float64(tables)/float64(all), 1)
	}
	if records > 0 {
		extra["max_projection_share"] = round(top/records, 3)
	}
	if all > 0 {
		s.DiskBytesPerDelivery = round(float64(disk)/float64(all), 1)
		if lb, err := logBytes(ctx, c.cfg.DSN, c.Schema); err == nil {
			extra["log_bytes_per_delivery"] = round(float64(lb)/float64(all), 1)
		} else {
			s.Notes = append(s.Notes, fmt.Sprintf("log size: %v", err))
		}
	}
	addExtra(s, extra)
	s.Notes = append(s.Notes, "cpu_s_per_1k sums every node (PostgreSQL's CPU is not counted); peak_rss_mb is the largest node; disk_bytes_per_delivery sums the nodes' data directories after they stopped (the log is in PostgreSQL: log_bytes_per_delivery)")
}

// logBytes is the size on disk of the log's tables in schema, indexes and
// TOAST included.
func logBytes(ctx context.Context, dsn, schema string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint
		FROM pg_class c JOIN pg_namespace ns ON ns.oid = c.relnamespace
		WHERE ns.nspname = $1 AND c.relkind = 'r'`, schema).Scan(&n)
	return n, err
}
