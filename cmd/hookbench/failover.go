package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// clusterFailover is the cluster scenario: --nodes nodes on one PostgreSQL
// log, a --history published and delivered first (none by default), a
// steady rate published through every node's API round robin, and
// --kills SIGKILLs from --kill-at on, at even intervals up to the end of
// publishing, each of a node other than the first (the seed the others
// joined), in turn from the last. A killed node is started again on its
// data just before the next kill; the last one stays down. Every delivery
// is awaited. failover_s is the longest gap between first arrivals at any
// endpoint that overlaps the time from the first kill to the end of
// publishing: the endpoints a dead node owned wait for the survivors to
// notice and take them over.
func clusterFailover(ctx context.Context, b *Bench) (Summary, error) {
	c, closeCluster, err := b.startCluster(ctx, b.cfg.Nodes)
	if err != nil {
		return Summary{}, err
	}
	defer closeCluster()
	b.api = c.APIs[0] // tenants, endpoints and counts through a node that stays
	ts, err := b.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	stopProgress := b.withProgress(ctx)
	defer stopProgress()
	history, err := b.publishHistory(ctx, ts, c.APIs)
	if err != nil {
		return Summary{}, err
	}

	start := time.Now()
	kctx, stopKills := context.WithCancel(ctx)
	killsDone := make(chan []time.Time, 1)
	go func() { killsDone <- b.killNodes(kctx, c, start) }()
	l := b.load(ts, b.cfg.Rate, b.cfg.Duration, 0)
	l.Retry, l.APIs = true, c.APIs
	_, perr := b.Publish(ctx, l)
	published := time.Now()
	stopKills()
	kills := <-killsDone
	if perr != nil {
		return Summary{}, perr
	}
	if len(kills) == 0 {
		return Summary{}, errors.New("no node was killed before publishing ended: give --kill-at before the end of --duration")
	}
	awaitErr := b.Await(ctx, b.cfg.Drain)
	if errors.Is(awaitErr, ErrNoDelivery) {
		return Summary{}, awaitErr
	}
	stopProgress()
	s := b.Summarize("cluster", start, 0)
	if history > 0 {
		s.Checks.add(b.Summarize("history", time.Time{}, historyPhase).Checks)
	}
	s.DrainS = round(time.Since(published).Seconds(), 2)
	if awaitErr != nil {
		s.Notes = append(s.Notes, awaitErr.Error())
	}
	g := b.arrivalGaps(start, kills[0], published)
	pg := gapsOf(b.ledger.answers(), start, kills[0], published)
	takeover, _ := b.ledger.longestWait(b.recv, kills[0], kills[0].Add(time.Second), time.Now())
	addExtra(&s, map[string]float64{
		"nodes":               float64(len(c.Nodes)),
		"history":             float64(history),
		"kills":               float64(len(kills)),
		"kill_at_s":           round(kills[0].Sub(start).Seconds(), 2),
		"failover_s":          round(g.failover.Seconds(), 3),
		"gap_before_kill_s":   round(g.before.Seconds(), 3),
		"publish_gap_s":       round(pg.failover.Seconds(), 3),
		"takeover_s":          round(takeover.Seconds(), 3),
		"endpoints_stalled":   float64(g.stalled),
		"duplicates_per_kill": round(float64(s.Duplicates)/float64(len(kills)), 2),
		"duplicate_ids":       float64(b.recv.Stats().DuplicateIDs),
		"publish_retries":     float64(b.retries.Load()),
	})
	s.Notes = append(s.Notes, "nodes and kills count the processes started and killed; failover_s: the longest gap between first arrivals at one endpoint overlapping the first kill → end of publishing; gap_before_kill_s: the same before it (steady-state jitter); publish_gap_s: the same as failover_s between the answers of the publishes planned for one endpoint (publishes retried off the killed node make a gap of the load's own, which failover_s counts too); takeover_s: the longest a delivery published in the second after the first kill waited from its publish's answer to its first arrival (the killed member's partitions wait for their takeover; it does not count the gaps of the load itself)")
	b.clusterFigures(ctx, c, &s)
	return s, nil
}

// killNodes kills --kills nodes of c with SIGKILL, one at a time, from
// start + --kill-at at even intervals until the end of publishing, until
// ctx ends; each kill is a window of the ledger. It returns the kills'
// times.
func (b *Bench) killNodes(ctx context.Context, c *Cluster, start time.Time) []time.Time {
	n := len(c.Nodes)
	every := (b.cfg.Duration - b.cfg.KillAt) / time.Duration(b.cfg.Kills)
	var kills []time.Time
	var down *Node
	for i := range b.cfg.Kills {
		if sleepCtx(ctx, time.Until(start.Add(b.cfg.KillAt+time.Duration(i)*every))) != nil {
			return kills
		}
		if down != nil {
			j := slices.Index(c.Nodes, down)
			if err := down.Restart(ctx); err != nil {
				fmt.Fprintf(b.stderr, "hookbench: restart node %d: %v\n", j+1, err)
				return kills
			}
			if err := c.APIs[j].Reconnect(down.GRPCAddr()); err != nil {
				fmt.Fprintf(b.stderr, "hookbench: %v\n", err)
				return kills
			}
		}
		victim := c.Nodes[n-1-i%(n-1)]
		at := time.Now()
		if err := victim.Kill(); err != nil {
			fmt.Fprintf(b.stderr, "hookbench: %v\n", err)
			return kills
		}
		b.ledger.disturbed("kill", at, time.Time{})
		kills, down = append(kills, at), victim
		fmt.Fprintf(b.stderr, "hookbench: kill -9 node %d of %d at %.1fs (kill %d of %d); publishing goes on through the others\n",
			slices.Index(c.Nodes, victim)+1, n, at.Sub(start).Seconds(), i+1, b.cfg.Kills)
	}
	return kills
}

// gaps are the arrival gaps around a kill.
type gaps struct {
	failover time.Duration // longest gap overlapping [kill, end of publishing]
	before   time.Duration // longest gap wholly between start and the kill
	stalled  int           // endpoints whose gap over the kill exceeds 2× before (and 1 s)
}

// arrivalGaps groups the first arrivals of the planned deliveries by
// endpoint and measures, per endpoint, the longest gap between consecutive
// arrivals that overlaps [kill, end], and the longest one before the kill.
// end is the end of publishing: a gap that runs past it counts only up to
// it, since no new work comes after it (the silence of an endpoint whose
// last deliveries are in, or whose ordered key waits for its head's retry,
// is not a stall).
func (b *Bench) arrivalGaps(start, kill, end time.Time) gaps {
	return gapsOf(b.ledger.arrivals(b.recv), start, kill, end)
}

// gapsOf is arrivalGaps over first arrivals by endpoint.
func gapsOf(byEP map[string][]time.Time, start, kill, end time.Time) gaps {
	var g gaps
	over := map[string]time.Duration{}
	for ep, ts := range byEP {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			a, z := ts[i-1], ts[i]
			d := z.Sub(a)
			switch {
			case z.After(kill) && a.Before(end):
				if z.After(end) {
					d = end.Sub(a)
				}
				over[ep] = max(over[ep], d)
			case a.After(start) && z.Before(kill):
				g.before = max(g.before, d)
			}
		}
	}
	for _, d := range over {
		g.failover = max(g.failover, d)
		if d > max(2*g.before, time.Second) {
			g.stalled++
		}
	}
	return g
}
