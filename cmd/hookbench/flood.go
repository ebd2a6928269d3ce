package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// floodPhases are the phases of the flood scenario: no flood, then made-up
// API keys, then made-up portal tokens (reversed every other round).
var floodPhases = []struct{ name, prefix string }{{"none", ""}, {"hk", "hk_"}, {"hlp", "hlp_"}}

// floodCallers are the anonymous callers of a flood, over floodConns
// connections: enough to keep the flooded node's two cores busy.
const floodCallers, floodConns = 64, 8

// flood is the anonymous-flood scenario: three nodes on one PostgreSQL log;
// --tenants tenants publish at --rate events/s (one event per call)
// through the first node while anonymous callers flood that node with
// made-up bearers for --duration per phase: none (the baseline), made-up
// API keys (hk_…), made-up portal tokens (hlp_…). Per phase it measures
// the flooded node's CPU per flood call (over the baseline's CPU), the
// calls answered per second, the tenants' publish p99, the other members'
// CPU against the baseline's, and the most connections of each node's log
// pool busy at once (pg_stat_activity, sampled every 20 ms). The figures
// are medians over --rounds; the order of the flood phases alternates.
func flood(ctx context.Context, b *Bench) (Summary, error) {
	if b.cfg.PG == "" {
		return Summary{}, ErrNoPostgres
	}
	c, closeCluster, err := b.startCluster(ctx, 3)
	if err != nil {
		return Summary{}, err
	}
	defer closeCluster()
	b.api = c.APIs[0]
	ts, err := b.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	figures := map[string][]float64{}
	phase := 0
	for round := range b.cfg.Rounds {
		order := []int{0, 1, 2}
		if round%2 == 1 {
			order = []int{0, 2, 1}
		}
		var base floodFigures
		for _, p := range order {
			phase++
			f, err := b.floodPhase(ctx, c, ts, floodPhases[p].prefix, phase)
			if err != nil {
				return Summary{}, fmt.Errorf("round %d, flood %s: %w", round+1, floodPhases[p].name, err)
			}
			if p == 0 {
				base = f
			}
			name := floodPhases[p].name
			perCall := 0.0
			if f.calls > 0 {
				perCall = (f.cpu[0] - base.cpu[0]).Seconds() * 1000 / float64(f.calls)
			}
			others := 0.0
			if o := base.cpu[1] + base.cpu[2]; o > 0 {
				others = float64(f.cpu[1]+f.cpu[2]) / float64(o)
			}
			for k, v := range map[string]float64{
				"_calls_per_sec": float64(f.calls) / f.took.Seconds(), "_cpu_ms_per_call": perCall,
				"_publish_p99_ms": f.publishP99, "_others_cpu_ratio": others,
				"_pool_busy_max": float64(f.poolBusy), "_refused_auth_bound": float64(f.refused),
				"_node1_cpu_s": f.cpu[0].Seconds(),
			} {
				figures[name+k] = append(figures[name+k], v)
			}
			fmt.Fprintf(b.stderr, "hookbench: round %d, flood %s: %.0f calls/s answered (%d refused by the auth bound), flooded node %.1f CPU s (%.3f ms per call over the baseline), others %.2f× the baseline, publish p99 %.1f ms, busiest log pool %d connections\n",
				round+1, name, float64(f.calls)/f.took.Seconds(), f.refused, f.cpu[0].Seconds(), perCall, others, f.publishP99, f.poolBusy)
		}
	}
	awaitErr := b.Await(ctx, b.cfg.Drain)
	s := b.Summarize("flood", time.Time{})
	if awaitErr != nil {
		s.Notes = append(s.Notes, awaitErr.Error())
	}
	extra := map[string]float64{"rounds": float64(b.cfg.Rounds)}
	for k, vs := range figures {
		extra[k] = round(median(vs), 3)
	}
	for _, r := range []string{"_cpu_ms_per_call", "_publish_p99_ms", "_calls_per_sec"} {
		if hk := extra["hk"+r]; hk > 0 {
			extra["hlp_to_hk"+r] = round(extra["hlp"+r]/hk, 3)
		}
	}
	addExtra(&s, extra)
	s.Notes = append(s.Notes, "figures are medians over the rounds; cpu_ms_per_call is the flooded node's CPU over the baseline phase's, per flood call answered; pool_busy_max is the most log connections of one node busy at once (its pool holds 4 on 2 cores)")
	return s, nil
}

// floodFigures are one phase's measurements.
type floodFigures struct {
	cpu        [3]time.Duration // each node's CPU during the phase
	calls      int64            // flood calls answered
	refused    int64            // of which refused by the node's bound of calls being authenticated
	took       time.Duration
	publishP99 float64 // ms
	poolBusy   int     // the most connections of one node's pool busy at once
}

// floodPhase runs one phase: the tenants' publishing through the first
// node for --duration, beside a flood of made-up bearers starting with
// prefix ("" for none).
func (b *Bench) floodPhase(ctx context.Context, c *Cluster, ts []*Tenant, prefix string, phase int) (floodFigures, error) {
	var f floodFigures
	var before [3]Usage
	for i, n := range c.Nodes {
		u, err := n.Usage()
		if err != nil {
			return f, err
		}
		before[i] = u
	}
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	watch := &poolWatch{dsn: b.cfg.PG, schema: c.Schema, nodes: c.Nodes}
	watchDone := make(chan error, 1)
	go func() { watchDone <- watch.run(pctx) }()
	var calls, refused atomic.Int64
	var flooders sync.WaitGroup
	if prefix != "" {
		for k := range floodConns {
			cc, err := grpc.NewClient(c.Nodes[0].GRPCAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				return f, err
			}
			defer cc.Close()
			portals := controlv1.NewPortalServiceClient(cc)
			for range floodCallers / floodConns {
				flooders.Go(func() { floodCalls(pctx, portals, prefix, k, &calls, &refused) })
			}
		}
	}
	start := time.Now()
	_, err := b.Publish(ctx, Load{Tenants: ts, Rate: b.cfg.Rate, Duration: b.cfg.Duration, Publishers: 4, Batch: 1, Payload: b.cfg.Payload, Phase: phase})
	f.took = time.Since(start)
	stop()
	flooders.Wait()
	err = errors.Join(err, <-watchDone)
	for i, n := range c.Nodes {
		u, uerr := n.Usage()
		err = errors.Join(err, uerr)
		f.cpu[i] = u.CPU - before[i].CPU
	}
	f.calls, f.refused, f.poolBusy = calls.Load(), refused.Load(), watch.max
	b.mu.Lock()
	f.publishP99 = percentiles(b.publishLat[phase], 0.99)[0]
	b.mu.Unlock()
	return f, err
}

// floodCalls calls GetSession with made-up bearers until ctx ends,
// counting the answers: UNAUTHENTICATED, or UNAVAILABLE from the node's
// bound of calls being authenticated.
func floodCalls(ctx context.Context, portals controlv1.PortalServiceClient, prefix string, conn int, calls, refused *atomic.Int64) {
	var secret [24]byte
	for i := 0; ctx.Err() == nil; i++ {
		_, _ = rand.Read(secret[:]) // crypto/rand.Read never fails
		bearer := prefix + hex.EncodeToString(secret[:])
		cctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+bearer), 10*time.Second)
		_, err := portals.GetSession(cctx, &controlv1.GetSessionRequest{})
		cancel()
		switch status.Code(err) {
		case codes.Unauthenticated:
			calls.Add(1)
		case codes.Unavailable:
			if ctx.Err() == nil {
				calls.Add(1)
				refused.Add(1)
			}
		}
	}
}

// poolWatch samples, every 20 ms, how many connections of each node's log
// pool run a statement (pg_stat_activity, state active), and keeps the
// most of one node at once. A connection is a node's when the node's
// process holds the socket of its client port.
type poolWatch struct {
	dsn, schema string
	nodes       []*Node
	max         int // set by run, read after it returned
}

func (w *poolWatch) run(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, w.dsn)
	if err != nil {
		return fmt.Errorf("watch the log's connections: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for ctx.Err() == nil {
		ports, err := w.ownPorts()
		if err != nil {
			return err
		}
		rows, err := conn.Query(ctx, `SELECT client_port FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND client_port IS NOT NULL`)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("watch the log's connections: %w", err)
		}
		busy := map[int]int{}
		for rows.Next() {
			var port int
			if rows.Scan(&port) == nil {
				if node, ok := ports[port]; ok {
					busy[node]++
				}
			}
		}
		rows.Close()
		for _, n := range busy {
			w.max = max(w.max, n)
		}
		if sleepCtx(ctx, 20*time.Millisecond) != nil {
			return nil
		}
	}
	return nil
}

// ownPorts maps the local TCP ports of the nodes' sockets to the node's
// index: /proc/PID/fd names each socket's inode, /proc/net/tcp its port.
func (w *poolWatch) ownPorts() (map[int]int, error) {
	inodes := map[string]int{}
	for i, n := range w.nodes {
		dir := filepath.Join("/proc", strconv.Itoa(n.PID()), "fd")
		fds, err := os.ReadDir(dir)
		if err != nil {
			return nil, fmt.Errorf("list the sockets of node %d: %w", i+1, err)
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = i
			}
		}
	}
	ports := map[int]int{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 {
				continue
			}
			node, ok := inodes[fields[9]]
			_, portHex, found := strings.Cut(fields[1], ":")
			if !ok || !found {
				continue
			}
			if port, err := strconv.ParseInt(portHex, 16, 32); err == nil {
				ports[int(port)] = node
			}
		}
		file.Close()
	}
	return ports, nil
}
