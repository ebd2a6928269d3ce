package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clusterScale is the cluster-scale scenario: the throughput load (as fast
// as accepted, bounded by --max-backlog) for --duration on a cluster of 1,
// then 2, then 3 nodes (and --rounds times, the order reversed every other
// round), each a fresh cluster on a fresh schema, publishing round robin
// through every node. nodes_N_per_sec is the sustained rate
// (deliveries received while publishing, per second), nodes_N_drained_per_sec
// the throughput scenario's figure (to the last delivery). Its summary is the 3-node run's, with
// nodes_N_per_sec for each size; lost and duplicates add up every size.
func clusterScale(ctx context.Context, b *Bench) (Summary, error) {
	var last Summary
	figures := map[string][]float64{} // by key, one per round
	var total Summary                 // the counts, added up over every run
	for round := 0; round < b.cfg.Rounds; round++ {
		// Alternate the order, so that a machine that gets busier or
		// quieter during the run does not favour one size.
		sizes := []int{1, 2, 3}
		if round%2 == 1 {
			sizes = []int{3, 2, 1}
		}
		for _, n := range sizes {
			s, err := b.scaleStep(ctx, n)
			if err != nil {
				return s, fmt.Errorf("%d node(s), round %d: %w", n, round+1, err)
			}
			key := "nodes_" + strconv.Itoa(n)
			fmt.Fprintf(b.stderr, "hookbench: round %d, %d node(s): %.1f deliveries/s sustained, %.1f with the drain (lost %d, duplicates %d)\n",
				round+1, n, s.Extra["sustained_per_sec"], s.DeliveriesPerSec, s.Lost, s.Duplicates)
			fmt.Fprintf(b.stderr, "hookbench: round %d, %d node(s): CPU s of the start %.1f, the load %.1f, the confirmation %.1f (%.0f deliveries listed), the stop %.1f (%d deliveries)\n",
				round+1, n, s.Extra["start_cpu_s"], s.Extra["load_cpu_s"], s.Extra["confirm_cpu_s"], s.Extra["confirm_listed"], s.Extra["stop_cpu_s"], s.Planned)
			fmt.Fprintf(b.stderr, "hookbench: round %d, %d node(s): %.3f CPU s per 1k deliveries (all nodes; %.3f while loaded), largest node applied %.1f%% of %0.f projection records, %.0f disk bytes per delivery (nodes) + %.0f (log)\n",
				round+1, n, s.CPUSecPer1k, s.Extra["load_cpu_s_per_1k"], 100*s.Extra["max_projection_share"], s.Extra["projection_records"], s.DiskBytesPerDelivery, s.Extra["log_bytes_per_delivery"])
			for k, v := range map[string]float64{
				"_per_sec": s.Extra["sustained_per_sec"], "_drained_per_sec": s.DeliveriesPerSec,
				"_cpu_s_per_1k": s.CPUSecPer1k, "_load_cpu_s_per_1k": s.Extra["load_cpu_s_per_1k"], "_max_projection_share": s.Extra["max_projection_share"],
				"_disk_bytes_per_delivery": s.DiskBytesPerDelivery, "_log_bytes_per_delivery": s.Extra["log_bytes_per_delivery"],
			} {
				figures[key+k] = append(figures[key+k], v)
			}
			figures[key+"_lost"] = append(figures[key+"_lost"], float64(s.Lost))
			total.add(s)
			if n == 3 {
				last = s
			}
		}
	}
	perSec := map[string]float64{}
	for k, vs := range figures {
		perSec[k] = median(vs)
		if strings.HasSuffix(k, "_lost") {
			perSec[k] = sum(vs)
		}
	}
	last.setCounts(total)
	addExtra(&last, perSec)
	for _, r := range []struct{ name, fig string }{
		{"speedup_3_nodes", "_per_sec"}, {"cpu_ratio_3_to_1", "_cpu_s_per_1k"}, {"load_cpu_ratio_3_to_1", "_load_cpu_s_per_1k"},
		{"disk_ratio_3_to_1", "_disk_bytes_per_delivery"},
	} {
		if one := perSec["nodes_1"+r.fig]; one > 0 {
			last.Extra[r.name] = round(perSec["nodes_3"+r.fig]/one, 3)
		}
	}
	fmt.Fprintf(b.stderr, "hookbench: three nodes against one (medians of %d round(s)): CPU per delivery %.2f× (%.2f× while loaded), disk per delivery %.2f× (nodes), largest projection share %.1f%%, sustained rate %.2f×\n",
		b.cfg.Rounds, last.Extra["cpu_ratio_3_to_1"], last.Extra["load_cpu_ratio_3_to_1"], last.Extra["disk_ratio_3_to_1"], 100*perSec["nodes_3_max_projection_share"], last.Extra["speedup_3_nodes"])
	last.Notes = append(last.Notes, "deliveries_per_sec, latency and node figures are the last 3-node run's; nodes_N_* are medians over the rounds (lost: the sum); the counts (expected, planned, deliveries, lost and the checks) add up every run")
	return last, nil
}

func median(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func sum(vs []float64) float64 {
	t := 0.0
	for _, v := range vs {
		t += v
	}
	return t
}

// scaleStep runs the load on a fresh cluster of n nodes with a receiver
// and a plan of its own, so that each size is measured and checked apart.
// sustained_per_sec counts the deliveries received while publishing went
// on (bounded by --max-backlog, so the node sets the pace), per second of
// publishing: stragglers of the drain do not dilute it.
func (b *Bench) scaleStep(ctx context.Context, n int) (_ Summary, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv, err := NewReceiver("127.0.0.1:0", nil, Behaviour{Latency: b.cfg.ReceiverLatency})
	if err != nil {
		return Summary{}, err
	}
	recvDone := make(chan error, 1)
	go func() { recvDone <- recv.Run(ctx) }()
	defer func() {
		cancel()
		err = errors.Join(err, <-recvDone)
	}()
	step := newBench(b.cfg, recv, b.stderr, b.runID+"n"+strconv.Itoa(n))

	c, closeCluster, err := step.startCluster(ctx, n)
	if err != nil {
		return Summary{}, err
	}
	defer closeCluster()
	step.api = c.APIs[0]
	ts, err := step.makeTenants(ctx, "t")
	if err != nil {
		return Summary{}, err
	}
	stopProgress := step.withProgress(ctx)
	defer stopProgress()
	l := step.load(ts, b.cfg.Rate, b.cfg.Duration, n)
	l.Retry, l.APIs = true, c.APIs
	before, usageErr := c.Usage() // the nodes' CPU so far: start, join, tenants
	start := time.Now()
	if _, err := step.Publish(ctx, l); err != nil {
		return Summary{}, err
	}
	published := time.Now()
	awaitErr := step.Await(ctx, b.cfg.Drain)
	if errors.Is(awaitErr, ErrNoDelivery) {
		return Summary{}, awaitErr
	}
	stopProgress()
	// The load's work ends when every node's projections have applied it,
	// too (they may follow the deliveries by seconds).
	usageErr = errors.Join(usageErr, c.AwaitProjections(ctx, b.cfg.Drain))
	after, err := c.Usage()
	usageErr = errors.Join(usageErr, err)
	s := step.Summarize("cluster-scale", start)
	if usageErr != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("CPU while loaded: %v", usageErr))
	} else if _, all := step.ledger.expected(); all > 0 {
		// The CPU of the publishing, the drain and the projections'
		// catching up alone: without each node's fixed costs (start,
		// joining, the counts, stop), which cpu_s_per_1k includes.
		addExtra(&s, map[string]float64{"load_cpu_s_per_1k": round((after.CPU-before.CPU).Seconds()/float64(all)*1000, 4),
			"start_cpu_s": round(before.CPU.Seconds(), 2), "load_cpu_s": round((after.CPU - before.CPU).Seconds(), 2)})
	}
	s.DrainS = round(time.Since(published).Seconds(), 2)
	if awaitErr != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("%d node(s): %v", n, awaitErr))
	}
	var during int64
	for _, rec := range recv.Records() {
		if !rec.FirstOK.IsZero() && rec.FirstOK.Before(published) {
			during++
		}
	}
	addExtra(&s, map[string]float64{"nodes": float64(n),
		"sustained_per_sec": round(float64(during)/published.Sub(start).Seconds(), 1)})
	step.clusterFigures(ctx, c, &s)
	return s, nil
}
