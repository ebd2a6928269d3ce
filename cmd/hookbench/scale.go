package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// clusterScale is the cluster-scale scenario: the throughput load (as fast
// as accepted, bounded by --max-backlog) for --duration on a cluster of 1,
// then 2, then 3 nodes, each a fresh cluster on a fresh schema, publishing
// round robin through every node. nodes_N_per_sec is the sustained rate
// (deliveries received while publishing, per second), nodes_N_drained_per_sec
// the throughput scenario's figure (to the last delivery). Its summary is the 3-node run's, with
// nodes_N_per_sec for each size; lost and duplicates add up every size.
func clusterScale(ctx context.Context, b *Bench) (Summary, error) {
	var last Summary
	perSec := map[string]float64{}
	var lost, dups, plans, delivered, unknown, mismatch int64
	for n := 1; n <= 3; n++ {
		s, err := b.scaleStep(ctx, n)
		if err != nil {
			return s, fmt.Errorf("%d node(s): %w", n, err)
		}
		key := "nodes_" + strconv.Itoa(n)
		fmt.Fprintf(b.stderr, "hookbench: %d node(s): %.1f deliveries/s sustained, %.1f with the drain (lost %d, duplicates %d)\n",
			n, s.Extra["sustained_per_sec"], s.DeliveriesPerSec, s.Lost, s.Duplicates)
		perSec[key+"_per_sec"] = s.Extra["sustained_per_sec"]
		perSec[key+"_drained_per_sec"] = s.DeliveriesPerSec
		perSec[key+"_lost"] = float64(s.Lost)
		perSec[key+"_cpu_s_per_1k"] = s.CPUSecPer1k
		perSec[key+"_max_projection_share"] = s.Extra["max_projection_share"]
		perSec[key+"_disk_bytes_per_delivery"] = s.DiskBytesPerDelivery
		perSec[key+"_log_bytes_per_delivery"] = s.Extra["log_bytes_per_delivery"]
		fmt.Fprintf(b.stderr, "hookbench: %d node(s): %.3f CPU s per 1k deliveries (all nodes), largest node applied %.1f%% of %0.f projection records, %.0f disk bytes per delivery (nodes) + %.0f (log)\n",
			n, s.CPUSecPer1k, 100*s.Extra["max_projection_share"], s.Extra["projection_records"], s.DiskBytesPerDelivery, s.Extra["log_bytes_per_delivery"])
		lost, dups, plans, delivered = lost+s.Lost, dups+s.Duplicates, plans+s.Planned, delivered+s.Deliveries
		unknown, mismatch = unknown+s.Unknown, mismatch+s.BodyMismatch
		last = s
	}
	last.Lost, last.Duplicates, last.Planned, last.Deliveries = lost, dups, plans, delivered
	last.Unknown, last.BodyMismatch = unknown, mismatch
	addExtra(&last, perSec)
	if perSec["nodes_1_per_sec"] > 0 {
		last.Extra["speedup_3_nodes"] = round(perSec["nodes_3_per_sec"]/perSec["nodes_1_per_sec"], 3)
	}
	if perSec["nodes_1_cpu_s_per_1k"] > 0 {
		last.Extra["cpu_ratio_3_to_1"] = round(perSec["nodes_3_cpu_s_per_1k"]/perSec["nodes_1_cpu_s_per_1k"], 3)
	}
	if perSec["nodes_1_disk_bytes_per_delivery"] > 0 {
		last.Extra["disk_ratio_3_to_1"] = round(perSec["nodes_3_disk_bytes_per_delivery"]/perSec["nodes_1_disk_bytes_per_delivery"], 3)
	}
	last.Notes = append(last.Notes, "deliveries_per_sec, latency and node figures are the 3-node run's; lost, duplicates, planned and deliveries add up 1, 2 and 3 nodes")
	return last, nil
}

// scaleStep runs the load on a fresh cluster of n nodes with a receiver
// and a plan of its own, so that each size is measured and checked apart.
// sustained_per_sec counts the deliveries received while publishing went
// on (bounded by --max-backlog, so the node sets the pace), per second of
// publishing: stragglers of the drain do not dilute it.
func (b *Bench) scaleStep(ctx context.Context, n int) (_ Summary, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	recv, err := NewReceiver("127.0.0.1:0", nil, Behaviour{})
	if err != nil {
		return Summary{}, err
	}
	recvDone := make(chan error, 1)
	go func() { recvDone <- recv.Run(ctx) }()
	defer func() {
		cancel()
		err = errors.Join(err, <-recvDone)
	}()
	step := &Bench{cfg: b.cfg, recv: recv, stderr: b.stderr, plan: map[string]planned{},
		publishLat: map[int][]time.Duration{}, runID: b.runID + "n" + strconv.Itoa(n)}

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
	s := step.Summarize("cluster-scale", start)
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
