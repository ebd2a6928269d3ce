package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// clusterFailover is the cluster scenario: three nodes on one PostgreSQL
// log, a steady rate published through every node's API round robin, the
// last node killed with SIGKILL at --kill-at, and every delivery awaited.
// failover_s is the longest gap between first arrivals at any endpoint that
// overlaps the time from the kill to the end of publishing: the endpoints
// the dead node owned wait for the survivors to notice and take them over.
func clusterFailover(ctx context.Context, b *Bench) (Summary, error) {
	const nodes = 3
	c, closeCluster, err := b.startCluster(ctx, nodes)
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

	victim := c.Nodes[nodes-1]
	start := time.Now()
	killed := make(chan time.Time, 1)
	kctx, stopKill := context.WithCancel(ctx)
	go func() {
		defer close(killed)
		if sleepCtx(kctx, b.cfg.KillAt) != nil {
			return
		}
		at := time.Now()
		if err := victim.Kill(); err != nil {
			fmt.Fprintf(b.stderr, "hookbench: %v\n", err)
			return
		}
		fmt.Fprintf(b.stderr, "hookbench: kill -9 node %d of %d at %.1fs; publishing goes on through the others\n",
			nodes, nodes, at.Sub(start).Seconds())
		killed <- at
	}()
	l := b.load(ts, b.cfg.Rate, b.cfg.Duration, 0)
	l.Retry, l.APIs = true, c.APIs
	_, perr := b.Publish(ctx, l)
	published := time.Now()
	stopKill()
	killedAt, ok := <-killed
	if perr != nil {
		return Summary{}, perr
	}
	if !ok {
		return Summary{}, errors.New("the node was not killed before publishing ended")
	}
	awaitErr := b.Await(ctx, b.cfg.Drain)
	if errors.Is(awaitErr, ErrNoDelivery) {
		return Summary{}, awaitErr
	}
	stopProgress()
	s := b.Summarize("cluster", start)
	s.DrainS = round(time.Since(published).Seconds(), 2)
	if awaitErr != nil {
		s.Notes = append(s.Notes, awaitErr.Error())
	}
	g := b.arrivalGaps(start, killedAt, published)
	const kills = 1
	addExtra(&s, map[string]float64{
		"nodes":                nodes,
		"kills":                kills,
		"kill_at_s":            round(killedAt.Sub(start).Seconds(), 2),
		"failover_s":           round(g.failover.Seconds(), 3),
		"gap_before_kill_s":    round(g.before.Seconds(), 3),
		"endpoints_stalled":    float64(g.stalled),
		"duplicates_per_kill":  round(float64(s.Duplicates)/kills, 2),
		"duplicate_ids":        float64(b.recv.Stats().DuplicateIDs),
		"publish_retries":      float64(b.retries.Load()),
		"rate_events_per_sec":  b.cfg.Rate,
		"endpoints_per_tenant": float64(b.cfg.Endpoints),
	})
	s.Notes = append(s.Notes, "failover_s: the longest gap between first arrivals at one endpoint overlapping kill → end of publishing; gap_before_kill_s: the same before the kill (steady-state jitter)")
	b.clusterFigures(ctx, c, &s)
	return s, nil
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
func (b *Bench) arrivalGaps(start, kill, end time.Time) gaps {
	b.mu.Lock()
	ids := make([]string, 0, len(b.plan))
	for id := range b.plan {
		ids = append(ids, id)
	}
	b.mu.Unlock()
	byEP := map[string][]time.Time{}
	b.recv.Lookup(ids, func(_ string, rec Record) {
		byEP[rec.Endpoint] = append(byEP[rec.Endpoint], rec.FirstSeen)
	})
	var g gaps
	over := map[string]time.Duration{}
	for ep, ts := range byEP {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			a, z := ts[i-1], ts[i]
			d := z.Sub(a)
			switch {
			case z.After(kill) && a.Before(end):
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
