package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"
)

// sealingScenario runs the throughput load twice in one run on one node,
// each phase on a process of its own started for it on the same data:
// first with --plain-payloads (payloads in clear), then with payloads and
// response bodies sealed under per-tenant data keys (the default). It
// reports deliveries/s and node CPU per delivery of each, and their
// ratios: what erasure costs.
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
	sealed := slices.Clone(b.node.Args())
	// The first load of a run is slower whatever it measures (the
	// receiver's connections, the publishers, the machine): it warms up,
	// unmeasured, before the two phases.
	warm, err := b.makeTenants(ctx, "w")
	if err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(b.stderr, "hookbench: warm-up for %v\n", b.cfg.Duration/2)
	if _, err := b.publishAndAwait(ctx, "sealing", b.load(warm, 0, b.cfg.Duration/2, 3)); err != nil {
		return Summary{}, err
	}
	for i, p := range []phase{{"plain", true}, {"sealed", false}} {
		args := sealed
		if p.plain {
			args = append(slices.Clone(sealed), "--plain-payloads")
		}
		if err := b.node.RestartWith(ctx, 30*time.Second, args); err != nil {
			return Summary{}, fmt.Errorf("restart the node for the %s phase: %w", p.name, err)
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
	s := b.Summarize("sealing", start, 1, 2, 3)
	s.DeliveriesPerSec, s.FirstAttemptP99 = last.DeliveriesPerSec, last.FirstAttemptP99
	addExtra(&s, extra)
	s.Notes = append(s.Notes, "deliveries_per_sec and first_attempt_* are the sealed phase's; extra holds both phases and their ratios; the counts and checks cover both and the warm-up")
	return s, nil
}
