package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ErrNoDelivery reports that the node delivered nothing within
// RunConfig.FirstDelivery after the first publish.
var ErrNoDelivery = errors.New("hookbench: the node delivered nothing")

// Bench is one run of a scenario: an in-process receiver, a node (started
// here or given), the tenants and endpoints made for the run, and the plan
// of every delivery published. Its methods are safe for concurrent use.
type Bench struct {
	cfg  RunConfig
	recv *Receiver
	node *Node // nil when the run targets a running node
	api  *API
	// apis, when set, are every node of a cluster: AddTenant waits until
	// each one's registry lists the new endpoints (a publish on a node
	// whose registry lags the log plans without them).
	apis   []*API
	runID  string
	stderr io.Writer

	mu         sync.Mutex // guards the fields below
	plan       map[string]planned
	awaited    int64                   // planned deliveries of awaited tenants
	awaitedEPs []string                // endpoints of awaited tenants
	allEPs     []string                // endpoints of every tenant of the run
	publishLat map[int][]time.Duration // PublishBatch calls, by phase
	events     int64
	firstAck   time.Time
	tenants    []*Tenant

	rr      atomic.Uint64 // spreads the batches of a cluster load over its nodes
	retries atomic.Int64  // publish calls retried on another node (cluster loads)

	republished     atomic.Int64 // events published again (Load.Twice)
	republishDiffer atomic.Int64 // of them, not answered as the same duplicate
}

// planned is one delivery as the publish answer planned it.
type planned struct {
	sent   time.Time // publish call started
	ack    time.Time // publish acknowledged
	tenant *Tenant
	phase  int
}

// Tenant is a tenant made for the run and its endpoints. Type i of the
// tenant is subscribed by endpoints i..i+fanout-1 (mod the count), so each
// event goes to fanout endpoints.
type Tenant struct {
	ID        string
	Endpoints []string
	Types     []string
	// Await says whether the run waits for this tenant's deliveries and
	// counts them in the summary.
	Await bool
}

// TenantSpec describes tenants to make.
type TenantSpec struct {
	Name      string // the tenant id is <run id>_<name>
	Endpoints int
	Fanout    int
	Behaviour *Behaviour // per endpoint; nil means the receiver's default
	Settings  *controlv1.EndpointSettings
	Await     bool
}

// AddTenant creates a tenant and its endpoints, points them at the
// receiver, and waits until the node's registry plans to them.
func (b *Bench) AddTenant(ctx context.Context, spec TenantSpec) (*Tenant, error) {
	if spec.Endpoints <= 0 || spec.Fanout <= 0 || spec.Fanout > spec.Endpoints {
		return nil, fmt.Errorf("tenant %s: want 1 <= fanout (%d) <= endpoints (%d)", spec.Name, spec.Fanout, spec.Endpoints)
	}
	t := &Tenant{ID: b.runID + "_" + spec.Name, Await: spec.Await}
	if err := b.api.CreateTenant(ctx, t.ID); err != nil {
		return nil, err
	}
	// Every event to every endpoint: one type and "*" subscriptions, since
	// an endpoint takes at most 100 types.
	all := spec.Fanout == spec.Endpoints
	for i := range spec.Endpoints {
		if !all || i == 0 {
			t.Types = append(t.Types, "bench.t"+strconv.Itoa(i))
		}
		t.Endpoints = append(t.Endpoints, t.ID+"_e"+strconv.Itoa(i))
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for j, ep := range t.Endpoints {
		g.Go(func() error {
			s := &controlv1.EndpointSettings{}
			if spec.Settings != nil {
				s = cloneSettings(spec.Settings)
			}
			s.Url = b.recv.URL(ep)
			for k := range spec.Fanout {
				if all {
					s.EventTypes = []string{"*"}
					break
				}
				s.EventTypes = append(s.EventTypes, t.Types[(j-k+spec.Endpoints)%spec.Endpoints])
			}
			if spec.Behaviour != nil {
				b.recv.SetBehaviour(ep, *spec.Behaviour)
			}
			secret, err := b.api.CreateEndpoint(gctx, t.ID, ep, s)
			if err != nil {
				return err
			}
			return b.recv.SetSecret(ep, secret)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	apis := b.apis
	if len(apis) == 0 {
		apis = []*API{b.api}
	}
	if err := poll(ctx, 30*time.Second, func() (bool, error) {
		for _, api := range apis {
			if n, err := api.CountEndpoints(ctx, t.ID); n != len(t.Endpoints) || err != nil {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return nil, fmt.Errorf("tenant %s: the node's registry does not list its %d endpoints: %w", t.ID, len(t.Endpoints), err)
	}
	b.mu.Lock()
	b.tenants = append(b.tenants, t)
	if t.Await {
		b.awaitedEPs = append(b.awaitedEPs, t.Endpoints...)
	}
	b.allEPs = append(b.allEPs, t.Endpoints...)
	b.mu.Unlock()
	return t, nil
}

func cloneSettings(s *controlv1.EndpointSettings) *controlv1.EndpointSettings {
	return &controlv1.EndpointSettings{RatePerSecond: s.GetRatePerSecond(), Burst: s.GetBurst(),
		MaxInFlight: s.GetMaxInFlight(), TimeoutMs: s.GetTimeoutMs(), MaxAttempts: s.GetMaxAttempts()}
}

// counts returns the awaited deliveries planned and received (2xx), and all
// events published.
func (b *Bench) counts() (plannedN, received, events int64) {
	plannedN, received, events, _ = b.countAll()
	return plannedN, received, events
}

// countAll is counts with the attempts on every endpoint of the run.
func (b *Bench) countAll() (plannedN, received, events, attempts int64) {
	b.mu.Lock()
	plannedN, events = b.awaited, b.events
	eps, all := b.awaitedEPs, b.allEPs
	b.mu.Unlock()
	received, _ = b.recv.SucceededFor(eps)
	_, attempts = b.recv.SucceededFor(all)
	return plannedN, received, events, attempts
}

func (b *Bench) backlog() int64 {
	p, r, _ := b.counts()
	return p - r
}

// Await waits until every awaited delivery planned so far was received
// with a 2xx, printing progress, for at most timeout. It fails with
// ErrNoDelivery when nothing arrived within cfg.FirstDelivery of the first
// publish. It returns the time the last delivery arrived.
func (b *Bench) Await(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p, r, _, attempts := b.countAll()
		if r >= p {
			return nil
		}
		b.mu.Lock()
		first := b.firstAck
		b.mu.Unlock()
		if attempts == 0 && !first.IsZero() && time.Since(first) > b.cfg.FirstDelivery {
			return fmt.Errorf("%w within %v of the first publish (%d deliveries planned): is the delivery engine wired into the node? Node log:\n%s",
				ErrNoDelivery, b.cfg.FirstDelivery, p, b.nodeTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d deliveries not received within %v", p-r, p, timeout)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

func (b *Bench) nodeTail() string {
	if b.node == nil {
		return "(node not started by hookbench)"
	}
	return b.node.Tail()
}

// Progress prints a line every interval until ctx ends.
func (b *Bench) Progress(ctx context.Context, interval time.Duration) {
	start := time.Now()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, r, ev := b.counts()
		st := b.recv.Stats()
		fmt.Fprintf(b.stderr, "hookbench: %5.0fs published %d events, delivered %d of %d planned (pending %d), receiver: %d requests, %d duplicates\n",
			time.Since(start).Seconds(), ev, r, p, max(0, p-r), st.Requests, st.Duplicates)
	}
}

// Confirm asks the node for its status counts of the awaited tenants (all
// phases), until nothing is pending and the succeeded count matches the
// planned deliveries, or timeout.
func (b *Bench) Confirm(ctx context.Context, s *Summary, timeout time.Duration) error {
	b.mu.Lock()
	want := map[*Tenant]int64{}
	for _, p := range b.plan {
		if p.tenant.Await {
			want[p.tenant]++
		}
	}
	b.mu.Unlock()
	var total int64
	for _, n := range want {
		total += n
	}
	var last error
	// countAll counts every succeeded and failed delivery: a read of the
	// whole history.
	countAll := func() (bool, error) {
		var ok, failed int64
		for t, n := range want {
			sc, complete, err := b.api.CountDeliveries(ctx, t.ID, "succeeded", 2000)
			if err != nil {
				return false, err
			}
			fc, _, err := b.api.CountDeliveries(ctx, t.ID, "failed", 20)
			if err != nil {
				return false, err
			}
			ok, failed = ok+sc, failed+fc
			if !complete || sc != n {
				last = fmt.Errorf("tenant %s: node says %d succeeded, %d planned", t.ID, sc, n)
			}
		}
		s.NodeSucceeded, s.NodeFailed = ok, failed
		return ok == total, nil
	}
	err := poll(ctx, timeout, func() (bool, error) {
		// Pending first, one page per tenant: the whole count is done once
		// nothing is pending, not on every poll (it would weigh in the
		// nodes' CPU figures).
		var pending int64
		for t := range want {
			pc, _, err := b.api.CountDeliveries(ctx, t.ID, "pending", 1)
			if err != nil {
				return false, err
			}
			pending += pc
		}
		s.NodePending = pending
		if pending > 0 {
			last = fmt.Errorf("the node says %d or more pending", pending)
			return false, nil
		}
		return countAll()
	})
	if err != nil && s.NodePending > 0 {
		_, _ = countAll() // what the node has, for the summary
	}
	if err != nil && last != nil {
		return fmt.Errorf("%w (%v)", err, last)
	}
	return err
}

// Summarize computes the summary of the awaited deliveries of the given
// phases (all phases when none are given).
func (b *Bench) Summarize(name string, since time.Time, phases ...int) Summary {
	s := Summary{Scenario: name}
	inPhase := func(p int) bool {
		if len(phases) == 0 {
			return true
		}
		for _, q := range phases {
			if p == q {
				return true
			}
		}
		return false
	}
	b.mu.Lock()
	ids := make([]string, 0, len(b.plan))
	plans := make(map[string]planned, len(b.plan))
	for id, p := range b.plan {
		if p.tenant.Await && inPhase(p.phase) {
			ids = append(ids, id)
			plans[id] = p
		}
	}
	var pubs []time.Duration
	for p, ds := range b.publishLat {
		if inPhase(p) {
			pubs = append(pubs, ds...)
		}
	}
	b.mu.Unlock()

	s.Planned = int64(len(ids))
	var lat, fromSent []time.Duration
	var lastOK time.Time
	var beforeAck int64
	b.recv.Lookup(ids, func(id string, rec Record) {
		p := plans[id]
		s.Attempts += int64(rec.Attempts)
		lat = append(lat, max(0, rec.FirstSeen.Sub(p.ack)))
		fromSent = append(fromSent, rec.FirstSeen.Sub(p.sent))
		if rec.FirstSeen.Before(p.ack) {
			beforeAck++
		}
		if rec.Successes > 0 {
			s.Deliveries++
			s.Duplicates += int64(rec.Successes - 1)
			if rec.FirstOK.After(lastOK) {
				lastOK = rec.FirstOK
			}
		}
	})
	s.Lost = s.Planned - s.Deliveries
	if s.Planned > 0 {
		s.AttemptsPerDelivery = round(float64(s.Attempts)/float64(s.Planned), 3)
	}
	if s.Deliveries > 0 && lastOK.After(since) {
		s.DeliveriesPerSec = round(float64(s.Deliveries)/lastOK.Sub(since).Seconds(), 1)
	}
	p := percentiles(lat, 0.5, 0.99, 1)
	s.FirstAttemptP50, s.FirstAttemptP99, s.FirstAttemptMax = p[0], p[1], p[2]
	s.PublishP99 = percentiles(pubs, 0.99)[0]
	// A batch is acknowledged after its last event, and its first events
	// are often delivered before that: the figures from the call's start
	// bound the latency from above where those from the ack bound it from
	// below.
	q := percentiles(fromSent, 0.5, 0.99)
	s.Extra = map[string]float64{"from_publish_call_p50_ms": q[0], "from_publish_call_p99_ms": q[1],
		"received_before_ack": float64(beforeAck)}

	st := b.recv.Stats()
	s.BodyMismatch = st.BodyMismatch
	b.mu.Lock()
	for id, rec := range b.recv.Records() {
		if _, ok := b.plan[id]; !ok && rec.Endpoint != rawEndpoint {
			s.Unknown++
		}
	}
	b.mu.Unlock()
	if s.Lost != 0 {
		s.Notes = append(s.Notes, fmt.Sprintf("%d planned deliveries were not received with a 2xx", s.Lost))
	}
	return s
}

// NodeFigures fills CPU, memory and disk per delivery. It stops the node
// first (SIGTERM: it flushes its projections, which keep no write-ahead
// log), so the disk figure is what the run leaves on disk.
func (b *Bench) NodeFigures(s *Summary) {
	if b.node == nil {
		s.Notes = append(s.Notes, "node not started by hookbench: no CPU, memory or disk figures")
		return
	}
	if err := b.node.Stop(30 * time.Second); err != nil {
		s.Notes = append(s.Notes, err.Error())
	}
	u, err := b.node.Usage()
	if err != nil {
		s.Notes = append(s.Notes, err.Error())
	}
	var all int64
	b.mu.Lock()
	all = int64(len(b.plan))
	b.mu.Unlock()
	if all > 0 {
		s.CPUSecPer1k = round(u.CPU.Seconds()/float64(all)*1000, 4)
	}
	s.PeakRSSMB = round(float64(u.PeakRSS)/(1<<20), 1)
	size, tables, err := dirSizes(b.node.cfg.DataDir)
	if err != nil {
		s.Notes = append(s.Notes, fmt.Sprintf("data directory size: %v", err))
	}
	if all > 0 {
		s.DiskBytesPerDelivery = round(float64(size)/float64(all), 1)
		addExtra(s, map[string]float64{"disk_table_bytes_per_delivery": round(float64(tables)/float64(all), 1)})
	}
}

// poll calls f until it reports done, an error, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, f func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := f()
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return fmt.Errorf("not done within %v: %w", timeout, err)
			}
			return fmt.Errorf("not done within %v", timeout)
		}
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// sleepCtx waits d (a pacing interval, not a synchronisation) or until ctx
// ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lockedWriter serialises writes of the goroutines that print progress.
type lockedWriter struct {
	mu sync.Mutex // guards w
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
