package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// sealingScenario runs the throughput load twice in one run on one node:
// with payloads and response bodies sealed under per-tenant data keys
// (the default), then, the node restarted on the same data with
// --plain-payloads, in clear. It reports deliveries/s and node CPU per
// delivery of each, and their ratios: what erasure costs.
func sealingScenario(ctx context.Context, b *Bench) (Summary, error) {
	if b.node == nil {
		return Summary{}, errors.New("sealing: hookbench must start the node to restart it with --plain-payloads; drop --node")
	}
	type phase struct {
		name  string
		plain bool
	}
	extra := map[string]float64{}
	var last Summary
	start := time.Now()
	for i, p := range []phase{{"sealed", false}, {"plain", true}} {
		if p.plain {
			args := append(slices.Clone(b.node.Args()), "--plain-payloads")
			if err := b.node.RestartWith(ctx, 30*time.Second, args); err != nil {
				return Summary{}, fmt.Errorf("restart the node with --plain-payloads: %w", err)
			}
		}
		ts, err := b.makeTenants(ctx, fmt.Sprintf("%c", p.name[0]))
		if err != nil {
			return Summary{}, err
		}
		before, err := b.node.Usage()
		if err != nil {
			return Summary{}, err
		}
		fmt.Fprintf(b.stderr, "hookbench: phase %d: payloads %s for %v\n", i+1, p.name, b.cfg.Duration)
		s, err := b.publishAndAwait(ctx, "sealing", b.load(ts, 0, b.cfg.Duration, i+1))
		if err != nil {
			return s, err
		}
		after, err := b.node.Usage()
		if err != nil {
			return Summary{}, err
		}
		extra[p.name+"_deliveries_per_sec"] = s.DeliveriesPerSec
		extra[p.name+"_first_attempt_p99_ms"] = s.FirstAttemptP99
		if s.Deliveries > 0 {
			extra[p.name+"_cpu_ms_per_1k"] = round(float64((after.CPU-before.CPU).Milliseconds())*1000/float64(s.Deliveries), 2)
		}
		last = s
	}
	if plain := extra["plain_deliveries_per_sec"]; plain > 0 {
		extra["sealed_to_plain_throughput"] = round(extra["sealed_deliveries_per_sec"]/plain, 3)
	}
	if plain := extra["plain_cpu_ms_per_1k"]; plain > 0 {
		extra["sealed_to_plain_cpu"] = round(extra["sealed_cpu_ms_per_1k"]/plain, 3)
	}
	s := b.Summarize("sealing", start, 1, 2)
	s.DeliveriesPerSec, s.FirstAttemptP99 = last.DeliveriesPerSec, last.FirstAttemptP99
	addExtra(&s, extra)
	s.Notes = append(s.Notes, "deliveries_per_sec and first_attempt_* are the plain phase's; extra holds both phases and their ratios; the counts and checks cover both")
	return s, nil
}
