package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The scenarios of a cluster whose members change under load: rolling
// restarts every node in turn, scale-out adds one. Both publish a history
// first (--history deliveries, delivered before anything is measured),
// then a steady phase (--duration at --rate), then the change under the
// same load, while a reader polls searches and single deliveries.

// The phases of the ledger these scenarios publish in.
const (
	historyPhase = 1000
	steadyPhase  = 1
	changePhase  = 2
)

// settleAfter is how long the load goes on after the change has settled:
// the change's phase includes what follows a move (the new owners'
// first attempts, the old owners' hand-over).
const settleAfter = 5 * time.Second

// change is the membership change a scenario makes while the load goes on:
// it reports its own figures. Publishing ends once it returns.
type change func(ctx context.Context, b *Bench, c *Cluster, r *reader) (map[string]float64, error)

// rolling is the rolling scenario: --nodes nodes on PostgreSQL; each node
// in turn is stopped with SIGTERM and started again on its data, and the
// next one only once the cluster has settled again (every partition live).
func rolling(ctx context.Context, b *Bench) (Summary, error) {
	return b.changeRun(ctx, "rolling", b.cfg.Nodes, func(ctx context.Context, b *Bench, c *Cluster, r *reader) (map[string]float64, error) {
		origin := time.Now()
		for i := range c.Nodes {
			r.setDown(i, true)
			began := time.Now()
			fmt.Fprintf(b.stderr, "hookbench: rolling: node %d stopped at second %.1f of the change\n", i+1, began.Sub(origin).Seconds())
			if err := c.Roll(ctx, i, 30*time.Second); err != nil {
				return nil, err
			}
			if err := c.waitSettled(ctx, 5*time.Minute); err != nil {
				return nil, fmt.Errorf("after the restart of node %d: %w", i+1, err)
			}
			b.ledger.disturbed("rolling restart", began, time.Now())
			r.setDown(i, false)
			fmt.Fprintf(b.stderr, "hookbench: rolling: node %d of %d restarted and the cluster settled in %.1f s\n",
				i+1, len(c.Nodes), time.Since(began).Seconds())
		}
		return map[string]float64{"restarts": float64(len(c.Nodes))}, nil
	})
}

// scaleOut is the scale-out scenario: --nodes nodes (2) on PostgreSQL
// under load, and one more joins. warmup_s runs from its start until the
// cluster has settled with it (it owns partitions, all of them live).
func scaleOut(ctx context.Context, b *Bench) (Summary, error) {
	return b.changeRun(ctx, "scale-out", b.cfg.Nodes, func(ctx context.Context, b *Bench, c *Cluster, r *reader) (map[string]float64, error) {
		began := time.Now()
		api, err := c.Join(ctx)
		if err != nil {
			return nil, err
		}
		// The reader asks the newcomer once its health check says serving,
		// as a load balancer with a readiness probe would: until then it
		// refuses the calls the others serve (it is catching up).
		sctx, stopWaiting := context.WithCancel(ctx)
		defer stopWaiting()
		serving := make(chan error, 1)
		go func() {
			err := WaitServing(sctx, c.Nodes[len(c.Nodes)-1].GRPCAddr())
			if err == nil {
				r.add(api)
			}
			serving <- err
		}()
		if err := c.waitSettled(ctx, 10*time.Minute); err != nil {
			return nil, fmt.Errorf("after the join: %w", err)
		}
		if err := <-serving; err != nil {
			return nil, fmt.Errorf("after the join: %w", err)
		}
		warm := time.Since(began)
		b.ledger.disturbed("join", began, time.Now())
		fmt.Fprintf(b.stderr, "hookbench: scale-out: node %d joined and the cluster settled in %.1f s\n", len(c.Nodes), warm.Seconds())
		return map[string]float64{"warmup_s": round(warm.Seconds(), 2)}, nil
	})
}

// changeRun starts a cluster of n nodes, publishes the history, the
// steady phase and the change's load, waits for every delivery, and
// summarizes: the counts over every phase (history included), the
// first-attempt p99 of the steady phase and during the change (until
// settleAfter past its end), the longest stall of an endpoint during it,
// and what the reader saw.
func (b *Bench) changeRun(ctx context.Context, name string, n int, ch change) (Summary, error) {
	c, closeCluster, err := b.startCluster(ctx, n)
	if err != nil {
		return Summary{}, err
	}
	defer closeCluster()
	b.api, b.apis = c.APIs[0], slices.Clone(c.APIs)
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
	r := b.startReader(ctx, c.APIs)
	defer r.stop()

	steadyStart := time.Now()
	l := b.load(ts, b.cfg.Rate, b.cfg.Duration, steadyPhase)
	l.Retry, l.APIs = true, slices.Clone(c.APIs)
	if _, err := b.Publish(ctx, l); err != nil {
		return Summary{}, err
	}
	stop, published := make(chan struct{}), make(chan error, 1)
	go func() {
		l := b.load(ts, b.cfg.Rate, 24*time.Hour, changePhase)
		l.Retry, l.APIs, l.Until = true, slices.Clone(c.APIs), stop
		_, err := b.Publish(ctx, l)
		published <- err
	}()
	changeStart := time.Now()
	fmt.Fprintf(b.stderr, "hookbench: %s: the change starts under load\n", name)
	figures, changeErr := ch(ctx, b, c, r)
	changed := time.Now()
	if changeErr == nil {
		changeErr = sleepCtx(ctx, settleAfter) // the load goes on: what follows the move
	}
	changeEnd := time.Now()
	close(stop)
	if err := errors.Join(changeErr, <-published); err != nil {
		return Summary{}, err
	}
	r.stop()
	awaitErr := b.Await(ctx, b.cfg.Drain)
	if errors.Is(awaitErr, ErrNoDelivery) {
		return Summary{}, awaitErr
	}
	stopProgress()

	s := b.Summarize(name, steadyStart, steadyPhase, changePhase)
	if history > 0 {
		s.Checks.add(b.Summarize("history", time.Time{}, historyPhase).Checks)
	}
	if awaitErr != nil {
		s.Notes = append(s.Notes, awaitErr.Error())
	}
	steady, during := b.Summarize(name, steadyStart, steadyPhase), b.Summarize(name, changeStart, changePhase)
	g := b.arrivalGaps(steadyStart, changeStart, changeEnd)
	pg := gapsOf(b.ledger.answers(), steadyStart, changeStart, changeEnd)
	if over := time.Duration(2 * steady.FirstAttemptP99 * float64(time.Millisecond)); over > 0 {
		bySecond, total, list := b.ledger.slow(b.recv, changePhase, over, changeStart)
		if err := b.writeSlow(ctx, c.APIs, list); err != nil {
			s.Notes = append(s.Notes, err.Error())
		}
		var line strings.Builder
		n := 0
		for _, sec := range slices.Sorted(maps.Keys(bySecond)) {
			fmt.Fprintf(&line, " %d:%d", sec, bySecond[sec])
			n += bySecond[sec]
		}
		fmt.Fprintf(b.stderr, "hookbench: %s: %d of %d first attempts over %v (twice the steady p99), by second of the change:%s\n",
			name, n, total, over.Round(time.Millisecond), line.String())
	}
	addExtra(&s, figures)
	addExtra(&s, map[string]float64{
		"nodes":                        float64(len(c.Nodes)),
		"history":                      float64(history),
		"change_s":                     round(changed.Sub(changeStart).Seconds(), 2),
		"max_stall_s":                  round(g.failover.Seconds(), 3),
		"max_stall_steady_s":           round(g.before.Seconds(), 3),
		"publish_gap_s":                round(pg.failover.Seconds(), 3),
		"publish_gap_steady_s":         round(pg.before.Seconds(), 3),
		"publish_max_ms_rolling":       round(float64(b.slowestPublish(changePhase))/float64(time.Millisecond), 1),
		"first_attempt_p99_ms_steady":  steady.FirstAttemptP99,
		"first_attempt_p99_ms_rolling": during.FirstAttemptP99,
		"unavailable_answers":          float64(r.unavailable.Load()),
		"reader_calls":                 float64(r.calls.Load()),
		"reader_errors":                float64(r.errs.Load()),
		"publish_retries":              float64(b.retries.Load()),
	})
	s.Notes = append(s.Notes, "history: deliveries published and delivered before the measured run (their checks count in the summary's); max_stall_s: the longest gap between first arrivals at one endpoint overlapping the change (max_stall_steady_s: the same in the steady phase); publish_gap_s: the same between the answers of the publishes planned for one endpoint (a stall on the publishing side shows in both); publish_max_ms_rolling: the slowest publish call answered during the change; first_attempt_p99_ms_rolling: during the change; unavailable_answers: the reader's searches and single GETs of delivered deliveries answered UNAVAILABLE or NOT_FOUND by a node that was up")
	for _, e := range r.unavailableExamples() {
		s.Notes = append(s.Notes, "unavailable answer: "+e)
	}
	b.clusterFigures(ctx, c, &s)
	return s, nil
}

// publishHistory publishes --history deliveries to ts as fast as accepted
// (each event goes to --fanout endpoints; at most --max-backlog, or
// 20,000, undelivered at once) through apis, and waits for them. It
// returns the deliveries received.
func (b *Bench) publishHistory(ctx context.Context, ts []*Tenant, apis []*API) (int64, error) {
	if b.cfg.History <= 0 {
		return 0, nil
	}
	fanout := int64(b.cfg.Fanout)
	events := (b.cfg.History + fanout - 1) / fanout
	fmt.Fprintf(b.stderr, "hookbench: history: %d deliveries (%d events) before the measured run\n", events*fanout, events)
	began := time.Now()
	l := b.load(ts, 0, 24*time.Hour, historyPhase)
	l.Events, l.Retry, l.APIs = events, true, slices.Clone(apis)
	l.MaxBacklog = cmp.Or(b.cfg.MaxBacklog, 20000)
	if _, err := b.Publish(ctx, l); err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	if err := b.Await(ctx, b.cfg.Drain); err != nil {
		return 0, fmt.Errorf("history: %w", err)
	}
	h := b.Summarize("history", time.Time{}, historyPhase)
	fmt.Fprintf(b.stderr, "hookbench: history: %d deliveries in %.1f s\n", h.Deliveries, time.Since(began).Seconds())
	return h.Deliveries, nil
}

// writeSlow writes the slow first attempts of a change to --slow-out, one
// line each, tab-separated after a header: the second of the change its
// publish was answered in, its delay and its endpoint; then, as its
// delivery's first attempt records them (read through apis, the first
// that answers; "-" when none did), where the delay went: planned_ms from
// the publish's answer to the plan, start_ms to the attempt's start,
// send_ms from the start to the arrival, and the attempt's waits once it
// was ready (ready_ms in all, then the tenant quota, the node's slots, the
// endpoint's in-flight limit and its rate limit) and its trigger; last,
// the address of the node that answered its publish.
func (b *Bench) writeSlow(ctx context.Context, apis []*API, list []slowAttempt) error {
	if b.cfg.SlowOut == "" {
		return nil
	}
	var out strings.Builder
	out.WriteString("answered_s\tdelay_ms\tendpoint\tplanned_ms\tstart_ms\tsend_ms\tready_ms\tquota_ms\tslot_ms\tin_flight_ms\trate_ms\ttrigger\tvia\n")
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	for _, a := range list {
		fmt.Fprintf(&out, "%.3f\t%s\t%s", a.At.Seconds(), ms(a.Delay), a.Endpoint)
		if at := firstAttempt(ctx, apis, a.Tenant, a.ID); at != nil {
			planned, started := at.d.GetPlannedAt().AsTime(), at.a.GetStartedAt().AsTime()
			w := at.a.GetWaits()
			fmt.Fprintf(&out, "\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s", ms(planned.Sub(a.Ack)), ms(started.Sub(a.Ack)), ms(a.FirstSeen.Sub(started)),
				w.GetTotalMs(), w.GetTenantQuotaMs(), w.GetSlotMs(), w.GetInFlightMs(), w.GetRateLimitMs(), at.a.GetTrigger().GetKind())
		} else {
			out.WriteString(strings.Repeat("\t-", 9))
		}
		fmt.Fprintf(&out, "\t%s\n", cmp.Or(a.Via, "-"))
	}
	if err := os.WriteFile(b.cfg.SlowOut, []byte(out.String()), 0o644); err != nil {
		return fmt.Errorf("--slow-out: %w", err)
	}
	return nil
}

// deliveryAttempt is a delivery and one of its attempts.
type deliveryAttempt struct {
	d *controlv1.Delivery
	a *hooklinev1.Attempt
}

// firstAttempt reads a delivery's first attempt through the first of apis
// that has it; nil when none does.
func firstAttempt(ctx context.Context, apis []*API, tenant, id string) *deliveryAttempt {
	for _, api := range apis {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := api.GetDelivery(cctx, tenant, id)
		cancel()
		if err == nil && len(d.GetAttempts()) > 0 {
			return &deliveryAttempt{d, d.GetAttempts()[0]}
		}
	}
	return nil
}
