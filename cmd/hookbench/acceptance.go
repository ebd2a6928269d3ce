package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// The acceptance criteria (docs/semantics.md): a fault passes when, after
// it, the ledger's checks are all 0 (lost, planned_mismatch, unplanned,
// bad_signature, body_mismatch), every duplicate is explained, reconcile
// finds the log and the node in agreement, the queue ages are back under
// their objective within recoverWithin of the fault's end, and the healthy
// tenants' first-attempt p99 during the fault is within p99Ratio of theirs
// before it (or under p99Floor, below which two small noisy figures make no
// meaningful ratio). The p99 is judged only over at least p99Samples first
// attempts on both sides: the p99 of a few hundred is their few slowest,
// noise (the short variant reports it, unjudged).
const (
	// queueObjective is the due work's age objective: 99 % of new
	// deliveries start their first attempt within 10 s (docs/architecture.md,
	// "Capacity"); overdue retries are held to the same.
	queueObjective = 10 * time.Second
	recoverWithin  = 60 * time.Second
	p99Ratio       = 2.0
	p99Floor       = 50.0 // ms
	p99Samples     = 1000
)

// FaultResult is one fault's row of the acceptance table and one object
// of the JSON line's faults list.
type FaultResult struct {
	Name string `json:"name"`
	// The durable counts of the fault's tenants, from reconcile (the log):
	// planned = delivered + failed + pending.
	Published int64 `json:"published"`
	Planned   int64 `json:"planned"`
	Delivered int64 `json:"delivered"`
	Failed    int64 `json:"failed"`
	Pending   int64 `json:"pending"`
	// The ledger's counts over the fault's events (see Summary): Expected
	// the deliveries the bench computed for the healthy tenants, and the
	// checks. A duplicate is explained by a window the bench caused (a
	// kill or a restart until the node serves again, a grain's stop after
	// an acknowledgement lost; see acceptance_window.go) or an answer its
	// sender had left.
	Expected int64 `json:"expected"`
	Checks
	// Queue ages during the fault (the node's gauges, the highest seen)
	// and the time from the fault's end until both were back under the
	// objective.
	OldestNewS   float64 `json:"oldest_new_s"`
	OldestRetryS float64 `json:"oldest_retry_s"`
	RecoveryS    float64 `json:"recovery_s"`
	// The healthy tenants' first-attempt p99 during the fault, and before
	// the faults (the baseline); HealthyP99 says whether the criterion
	// applies: not when every endpoint is the fault, nor over fewer than
	// p99Samples first attempts.
	P99BeforeMs float64 `json:"p99_before_ms"`
	P99DuringMs float64 `json:"p99_during_ms"`
	HealthyP99  bool    `json:"p99_judged"`
	// Reconcile is the verdict of `hookline reconcile` after the fault:
	// "clean", or its discrepancies by kind.
	Reconcile string `json:"reconcile"`
	// Kills counts the processes the fault killed; Extra holds
	// fault-specific figures.
	Kills int                `json:"kills,omitempty"`
	Extra map[string]float64 `json:"extra,omitempty"`
	Pass  bool               `json:"pass"`
	// Why lists the criteria missed.
	Why []string `json:"why,omitempty"`
}

// AcceptanceSummary is the acceptance run's last line: every fault's
// result, and the ledger's counts summed over them.
type AcceptanceSummary struct {
	Scenario string        `json:"scenario"`
	Mode     string        `json:"mode"`
	Faults   []FaultResult `json:"faults"`
	Pass     bool          `json:"pass"`
	Checks
	Criteria string         `json:"criteria"`
	Config   map[string]any `json:"config,omitempty"`
	Notes    []string       `json:"notes,omitempty"`
}

// add counts a fault's result in the summary.
func (s *AcceptanceSummary) add(r FaultResult) {
	s.Faults = append(s.Faults, r)
	s.Pass = s.Pass && r.Pass
	s.Checks.add(r.Checks)
}

// criteria says the criteria in one line, for the JSON.
var criteria = fmt.Sprintf("lost, planned_mismatch, unplanned, bad_signature, body_mismatch = 0 (the bench's own ledger); every duplicate explained by a window the bench caused or an answer its sender had left; reconcile clean; queue ages under %v within %v of the fault's end; healthy tenants' first-attempt p99 within %gx of before (or under %g ms)",
	queueObjective, recoverWithin, p99Ratio, p99Floor)

// acceptance is one acceptance run: the nodes (one, or a cluster), and
// what the faults share.
type acceptance struct {
	b        *Bench
	nodes    []*Node
	apis     []*API
	bin      string
	baseline float64          // the healthy tenants' first-attempt p99 with no fault, ms
	baseN    int64            // the first attempts it was taken over
	pg       *privatePostgres // --pg private: the server the pg-restart fault restarts
	base     [][]string       // each node's own serve arguments (a cluster's store and join)
}

// acceptanceRun runs every fault and prints the table and the JSON line.
func acceptanceRun(ctx context.Context, b *Bench, stdout io.Writer) error {
	bin, err := b.hooklineBinary(ctx)
	if err != nil {
		return err
	}
	a := &acceptance{b: b, bin: bin}
	mode := "one node, embedded log"
	cleanup, err := a.start(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	if len(a.nodes) > 1 {
		mode = fmt.Sprintf("%d nodes on PostgreSQL", len(a.nodes))
	}
	stopProgress := b.withProgress(ctx)
	defer stopProgress()

	sum := AcceptanceSummary{Scenario: "acceptance", Mode: mode, Criteria: criteria, Pass: true, Config: b.cfg.view(b.config)}
	for i, f := range faultList {
		if !a.selected(f) {
			continue
		}
		fmt.Fprintf(b.stderr, "hookbench: acceptance: %s: %s\n", f.name, f.summary)
		r, err := a.runFault(ctx, f, i+1)
		if err != nil {
			return fmt.Errorf("fault %s: %w", f.name, err)
		}
		fmt.Fprintf(b.stderr, "hookbench: acceptance: %s: pass=%v %s\n", f.name, r.Pass, strings.Join(r.Why, "; "))
		sum.add(r)
	}
	stopProgress()
	if err := sum.Print(stdout); err != nil {
		return err
	}
	if !sum.Pass {
		var failed []string
		for _, f := range sum.Faults {
			if !f.Pass {
				failed = append(failed, fmt.Sprintf("%s (%s)", f.Name, strings.Join(f.Why, "; ")))
			}
		}
		return fmt.Errorf("%w: %s", ErrFailed, strings.Join(failed, ", "))
	}
	return nil
}

// selected reports whether the run includes f: --only, and the
// PostgreSQL faults only on a cluster.
func (a *acceptance) selected(f faultSpec) bool {
	if f.pgOnly && a.pg == nil {
		return false
	}
	only := a.b.cfg.Only
	return len(only) == 0 || f.name == "baseline" || slices.Contains(only, f.name)
}

// start starts the node (or, with --pg, a cluster on a PostgreSQL server of
// its own) and dials it.
func (a *acceptance) start(ctx context.Context) (func(), error) {
	b := a.b
	if b.cfg.PG != "" {
		return a.startCluster(ctx)
	}
	dir, err := os.MkdirTemp("", "hookbench-acceptance-")
	if err != nil {
		return nil, err
	}
	n, api, err := StartDialed(ctx, NodeConfig{Binary: a.bin, DataDir: filepath.Join(dir, "data"), AdminToken: "hb_" + randomHex(16), Log: a.nodeLog(),
		Args: a.nodeArgs("")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	a.nodes, a.apis = []*Node{n}, []*API{api}
	b.node, b.api, b.cfg.Token = n, api, n.cfg.AdminToken
	fmt.Fprintf(b.stderr, "hookbench: acceptance: node %s, data %s\n", n.GRPCAddr(), dir)
	return func() {
		api.Close()
		if err := n.Stop(30 * time.Second); err != nil {
			fmt.Fprintf(b.stderr, "hookbench: %v\n", err)
		}
		if b.cfg.KeepData {
			fmt.Fprintf(b.stderr, "hookbench: data kept in %s\n", dir)
			return
		}
		os.RemoveAll(dir)
	}, nil
}

func (a *acceptance) nodeLog() io.Writer {
	g := &grainStops{ledger: a.b.ledger}
	if a.b.cfg.NodeLog {
		g.next = a.b.stderr
	}
	return g
}

// nodeArgs are a node's extra arguments with the faults spec (none when
// empty) and the run's --node-faults: a short background reconcile, so
// that its metrics show the run.
func (a *acceptance) nodeArgs(faults string, base ...string) []string {
	args := append(slices.Clone(base), "--reconcile-every", "5s")
	var spec []string
	for _, f := range []string{a.b.cfg.NodeFaults, faults} {
		if f != "" {
			spec = append(spec, f)
		}
	}
	return append(args, faultArgs(strings.Join(spec, ","))...)
}

// faultRun is one fault under way.
type faultRun struct {
	spec    faultSpec
	phase   int
	healthy []*Tenant
	extra   []*Tenant // the fault's own tenants (not awaited)
	kills   int
	badSigs int64 // the receiver's refusals before the fault
	figures map[string]float64
	notes   []string
}

// runFault runs one fault: its tenants publish the healthy load while the
// fault lasts, then the run waits for every delivery, measures and
// reconciles.
func (a *acceptance) runFault(ctx context.Context, f faultSpec, phase int) (FaultResult, error) {
	fr := &faultRun{spec: f, phase: phase, figures: map[string]float64{}}
	res := FaultResult{Name: f.name, HealthyP99: f.healthyP99, P99BeforeMs: a.baseline}
	if err := a.addHealthy(ctx, fr); err != nil {
		return res, err
	}
	if f.prepare != nil {
		if err := f.prepare(ctx, a, fr); err != nil {
			return res, err
		}
	}
	mon := a.monitor(ctx)
	defer mon.stop()
	fr.badSigs = a.b.recv.Stats().BadSignature
	start, end, err := a.underFault(ctx, fr)
	if err != nil {
		return res, err
	}
	if err := a.measure(ctx, fr, mon, start, end, &res); err != nil {
		return res, err
	}
	judge(&res)
	res.Why = append(res.Why, fr.notes...)
	return res, nil
}

// addHealthy adds the two tenants that publish the healthy load of a
// fault.
func (a *acceptance) addHealthy(ctx context.Context, fr *faultRun) error {
	b := a.b
	for i := range 2 {
		t, err := b.AddTenant(ctx, TenantSpec{Name: fmt.Sprintf("%s_h%d", strings.ReplaceAll(fr.spec.name, "-", "_"), i), Endpoints: b.cfg.Endpoints, Fanout: b.cfg.Fanout,
			Settings: b.cfg.settings(), Await: true})
		if err != nil {
			return err
		}
		fr.healthy = append(fr.healthy, t)
	}
	return nil
}

// underFault publishes the healthy load while the fault lasts: on the node
// (restarted with --faults), on the receiver, or in the load. It returns
// when the fault started and ended.
func (a *acceptance) underFault(ctx context.Context, fr *faultRun) (start, end time.Time, err error) {
	b, f := a.b, fr.spec
	fctx, endFault := context.WithCancel(ctx)
	defer endFault()
	var wg sync.WaitGroup
	var faultErr error
	start = time.Now()
	if f.nodeFaults != "" {
		if err := a.restartAll(ctx, f.nodeFaults); err != nil {
			return start, end, err
		}
		if f.kills {
			wg.Go(func() { fr.kills, faultErr = a.restartKilled(fctx, f.nodeFaults, max(b.cfg.Kills, 1)) })
		}
	}
	if f.during != nil {
		wg.Go(func() {
			if err := f.during(fctx, a, fr); err != nil && fctx.Err() == nil {
				faultErr = err
			}
		})
	}
	l := b.load(fr.healthy, b.cfg.Rate, b.cfg.Duration, fr.phase)
	l.Retry = true
	if len(a.apis) > 1 {
		l.APIs = a.apis
	}
	if f.load != nil {
		f.load(&l)
	}
	_, pubErr := b.Publish(ctx, l)
	endFault()
	wg.Wait()
	if f.after != nil {
		f.after(ctx, a, fr)
	}
	if f.nodeFaults != "" {
		if err := a.restartAll(ctx, ""); err != nil {
			return start, end, err
		}
	}
	end = time.Now()
	return start, end, errors.Join(pubErr, faultErr)
}

// measure waits for every delivery and for the queue ages to come back,
// then sets res's figures, explains the lineage and reconciles.
func (a *acceptance) measure(ctx context.Context, fr *faultRun, mon *monitor, start, end time.Time, res *FaultResult) error {
	b := a.b
	awaitErr := b.Await(ctx, b.cfg.Drain)
	if errors.Is(awaitErr, ErrNoDelivery) {
		return awaitErr
	}
	if awaitErr != nil {
		fr.notes = append(fr.notes, awaitErr.Error())
	}
	rec, err := mon.recovered(ctx, end, recoverWithin+30*time.Second)
	if err != nil {
		return err
	}
	res.RecoveryS = round(rec.Seconds(), 1)
	res.OldestNewS, res.OldestRetryS = mon.maxDuring(start, end)
	s := b.Summarize(fr.spec.name, start, fr.phase)
	res.Expected, res.Checks = s.Expected, s.Checks
	res.BadSignature = s.BadSignature - fr.badSigs
	res.P99DuringMs = s.FirstAttemptP99
	if s.Deliveries == 0 {
		fr.notes = append(fr.notes, fmt.Sprintf("nothing delivered (%d expected)", s.Expected))
	}
	if fr.spec.name == "baseline" {
		a.baseline, a.baseN = s.FirstAttemptP99, s.Deliveries
		res.P99BeforeMs = s.FirstAttemptP99
	}
	if res.HealthyP99 && (s.Deliveries < p99Samples || a.baseN < p99Samples) {
		res.HealthyP99 = false
		fr.figures["p99_samples"] = float64(min(s.Deliveries, a.baseN))
	}
	if err := a.reconcile(ctx, fr, res); err != nil {
		return err
	}
	res.Kills = fr.kills
	if len(fr.figures) > 0 {
		res.Extra = fr.figures
	}
	return nil
}

// judge sets Pass and Why from the criteria.
func judge(r *FaultResult) {
	r.Pass = true
	miss := func(format string, args ...any) {
		r.Pass = false
		r.Why = append(r.Why, fmt.Sprintf(format, args...))
	}
	for _, f := range r.Checks.failed() {
		miss("%s", f)
	}
	if r.Expected == 0 {
		miss("nothing expected: the healthy tenants published nothing")
	}
	if r.Reconcile != "clean" {
		miss("reconcile: %s", r.Reconcile)
	}
	if r.RecoveryS > recoverWithin.Seconds() {
		miss("queue ages back under %v after %.1f s (limit %v)", queueObjective, r.RecoveryS, recoverWithin)
	}
	if r.HealthyP99 && r.P99BeforeMs > 0 && r.P99DuringMs > p99Floor && r.P99DuringMs > p99Ratio*r.P99BeforeMs {
		miss("healthy p99 %.1f ms is %.1fx the %.1f ms before", r.P99DuringMs, r.P99DuringMs/r.P99BeforeMs, r.P99BeforeMs)
	}
}

// restartAll restarts every node with faults ("" none); in a cluster only
// the nodes after the first get them (the first is the others' seed), and
// only they are restarted.
func (a *acceptance) restartAll(ctx context.Context, faults string) error {
	for i, n := range a.nodes {
		if len(a.nodes) > 1 && i == 0 {
			continue
		}
		base := a.baseArgs(i)
		began := time.Now()
		if err := n.RestartWith(ctx, 30*time.Second, a.nodeArgs(faults, base...)); err != nil {
			return err
		}
		if err := WaitServing(ctx, n.GRPCAddr()); err != nil {
			return err
		}
		a.b.ledger.disturbed("restart", began, time.Now())
		if err := a.apis[i].Reconnect(n.GRPCAddr()); err != nil {
			return err
		}
	}
	return nil
}

// restartKilled restarts, with the same faults, the nodes the faults kill,
// until kills processes were killed or ctx ends; it returns the kills.
func (a *acceptance) restartKilled(ctx context.Context, faults string, kills int) (int, error) {
	killed := 0
	for killed < kills {
		cases := make([]<-chan struct{}, len(a.nodes))
		for i, n := range a.nodes {
			cases[i] = n.Exited()
		}
		i, ok := firstClosed(ctx, cases)
		if !ok {
			return killed, nil
		}
		exited := time.Now()
		if len(a.nodes) > 1 && i == 0 {
			return killed, errors.New("the seed node died")
		}
		killed++
		fmt.Fprintf(a.b.stderr, "hookbench: acceptance: node %d killed by its fault (%d of %d); restarting\n", i+1, killed, kills)
		args := a.nodeArgs(faults, a.baseArgs(i)...)
		if killed == kills {
			args = a.nodeArgs("", a.baseArgs(i)...)
		}
		if err := a.nodes[i].RestartWith(context.WithoutCancel(ctx), 30*time.Second, args); err != nil {
			return killed, err
		}
		if err := WaitServing(context.WithoutCancel(ctx), a.nodes[i].GRPCAddr()); err != nil {
			return killed, err
		}
		a.b.ledger.disturbed("killed by its fault", exited, time.Now())
		if err := a.apis[i].Reconnect(a.nodes[i].GRPCAddr()); err != nil {
			return killed, err
		}
	}
	return killed, nil
}

// firstClosed waits until one of chs is closed (its index, true) or ctx
// ends (false).
func firstClosed(ctx context.Context, chs []<-chan struct{}) (int, bool) {
	done := make(chan int, len(chs))
	stop := make(chan struct{})
	defer close(stop)
	for i, ch := range chs {
		go func() {
			select {
			case <-ch:
				done <- i
			case <-stop:
			}
		}()
	}
	select {
	case i := <-done:
		return i, true
	case <-ctx.Done():
		return 0, false
	}
}

// reconcile runs reconcile on the node and takes the fault's durable
// counts from it.
func (a *acceptance) reconcile(ctx context.Context, fr *faultRun, res *FaultResult) error {
	rep, err := a.b.api.Reconcile(ctx, &controlv1.ReconcileRequest{})
	if err != nil {
		return err
	}
	fr.figures["reconcile_s"] = round(rep.GetFinishedAt().AsTime().Sub(rep.GetStartedAt().AsTime()).Seconds(), 2)
	for _, c := range rep.GetChecks() {
		if c.GetName() == "deliveries" {
			fr.figures["reconciled_deliveries"] = float64(c.GetExamined())
		}
	}
	mine := map[string]bool{}
	for _, t := range append(slices.Clone(fr.healthy), fr.extra...) {
		mine[t.ID] = true
	}
	for _, t := range rep.GetTenants() {
		if !mine[t.GetTenantId()] {
			continue
		}
		res.Published += t.GetEvents()
		res.Planned += t.GetPlanned()
		res.Delivered += t.GetSucceeded()
		res.Failed += t.GetFailed()
		res.Pending += t.GetPending()
	}
	if rep.GetClean() {
		res.Reconcile = "clean"
		return nil
	}
	byKind := map[string]int{}
	for _, d := range rep.GetDiscrepancies() {
		byKind[d.GetKind()]++
	}
	var parts []string
	for _, k := range slices.Sorted(mapsKeys(byKind)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, byKind[k]))
	}
	res.Reconcile = fmt.Sprintf("%d discrepancies (%s) %s", rep.GetDiscrepanciesTotal(), strings.Join(parts, ", "), strings.Join(rep.GetNotes(), "; "))
	for _, d := range rep.GetDiscrepancies()[:min(3, len(rep.GetDiscrepancies()))] {
		fr.notes = append(fr.notes, fmt.Sprintf("%s: %s (ids %s)", d.GetKind(), d.GetDetail(), strings.Join(d.GetDeliveryIds(), " ")))
	}
	return nil
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// Print writes the table and, last, the JSON line.
func (s AcceptanceSummary) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "acceptance (%s)\n", s.Mode)
	fmt.Fprintln(tw, "fault\tpublished\tplanned\tdelivered\tfailed\tpending\texpected\tlost\tchecks\tdup (unexplained)\toldest new s\toldest retry s\trecovery s\tp99 before ms\tp99 during ms\treconcile\tpass\t")
	for _, f := range s.Faults {
		p99 := fmt.Sprintf("%.1f", f.P99DuringMs)
		if !f.HealthyP99 {
			p99 += " (n/a)"
		}
		checks := fmt.Sprintf("%d/%d/%d/%d", f.PlannedMismatch, f.Unplanned, f.BadSignature, f.BodyMismatch)
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d (%d)\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t%v\t\n", f.Name, f.Published, f.Planned, f.Delivered, f.Failed,
			f.Pending, f.Expected, f.Lost, checks, f.Duplicates, f.Unexplained, f.OldestNewS, f.OldestRetryS, f.RecoveryS, f.P99BeforeMs, p99, shortVerdict(f.Reconcile), f.Pass)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, f := range s.Faults {
		if len(f.Why) > 0 || len(f.Extra) > 0 || f.Kills > 0 {
			fmt.Fprintf(w, "%s:", f.Name)
			if f.Kills > 0 {
				fmt.Fprintf(w, " kills %d;", f.Kills)
			}
			for _, k := range slices.Sorted(mapsKeys(f.Extra)) {
				fmt.Fprintf(w, " %s %g;", k, f.Extra[k])
			}
			for _, why := range f.Why {
				fmt.Fprintf(w, " %s;", why)
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "checks: planned mismatch/unplanned/bad signature/body mismatch\n")
	for _, k := range slices.Sorted(maps.Keys(s.Config)) {
		fmt.Fprintf(w, "config %s: %v\n", k, s.Config[k])
	}
	fmt.Fprintf(w, "criteria: %s\nverdict: pass=%v\n", s.Criteria, s.Pass)
	line, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", line)
	return err
}

func shortVerdict(v string) string {
	if len(v) > 40 {
		return v[:40] + "…"
	}
	return v
}
