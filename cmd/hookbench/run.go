package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"golang.org/x/sync/errgroup"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ErrNoDelivery reports that the node delivered nothing within
// RunConfig.FirstDelivery after the first publish.
var ErrNoDelivery = errors.New("hookbench: the node delivered nothing")

// Bench is one run of a scenario: an in-process receiver, a node (started
// here or given), the tenants and endpoints made for the run, and the
// ledger of every delivery published. Its methods are safe for concurrent
// use.
type Bench struct {
	cfg RunConfig
	// failKeyOnce starts --fail-key with the first keyed publishing.
	failKeyOnce sync.Once
	// pullEndpoints makes the endpoints AddTenant creates pull endpoints.
	pullEndpoints bool
	// destination, when set, gives the URL of the endpoint AddTenant
	// creates under a receiver name (a broker's); nil: the receiver's.
	destination func(name string) string
	recv        *Receiver
	node        *Node // nil when the run targets a running node
	api         *API
	// apis, when set, are every node of a cluster: AddTenant waits until
	// each one's registry lists the new endpoints (a publish on a node
	// whose registry lags the log plans without them).
	apis   []*API
	runID  string
	stderr io.Writer
	ledger *ledger
	// config names the scenario's own settings for its summary
	// (scenario.config).
	config []string

	mu         sync.Mutex              // guards the fields below
	awaitedEPs []string                // endpoints of awaited tenants
	publishLat map[int][]time.Duration // PublishBatch calls, by phase
	events     int64
	firstAck   time.Time
	tenants    []*Tenant

	rr      atomic.Uint64 // spreads the batches of a cluster load over its nodes
	retries atomic.Int64  // publish calls retried on another node (cluster loads)

	republished     atomic.Int64 // events published again (Load.Twice)
	republishDiffer atomic.Int64 // of them, not answered as the same duplicate
}

// newBench is a Bench of cfg with its receiver and an empty ledger.
func newBench(cfg RunConfig, recv *Receiver, stderr io.Writer, runID string) *Bench {
	return &Bench{cfg: cfg, recv: recv, stderr: stderr, runID: runID, ledger: newLedger(), publishLat: map[int][]time.Duration{}}
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
	// subs are the endpoints subscribed to each type, as the bench created
	// them (the ledger's expectation); names maps the node's endpoint ids
	// to the bench's names. Both are set before the tenant is used.
	subs  map[string][]string
	names map[string]string
}

// TenantSpec describes tenants to make.
type TenantSpec struct {
	Name      string // the tenant id is <run id>_<name>
	Endpoints int
	Fanout    int
	Behaviour *Behaviour // per endpoint; nil means the receiver's default
	Settings  *controlv1.EndpointSettings
	// Each, when set, are the settings of each endpoint in place of
	// Settings.
	Each  []*controlv1.EndpointSettings
	Await bool
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
	// Endpoint j takes types j, j-1, ..., j-fanout+1 (mod the count).
	types := make([][]string, len(t.Endpoints))
	t.subs, t.names = map[string][]string{}, map[string]string{}
	for j, ep := range t.Endpoints {
		if all {
			types[j] = []string{"*"}
		} else {
			for k := range spec.Fanout {
				types[j] = append(types[j], t.Types[(j-k+spec.Endpoints)%spec.Endpoints])
			}
		}
		for _, typ := range types[j] {
			if typ == "*" {
				for _, all := range t.Types {
					t.subs[all] = append(t.subs[all], ep)
				}
				continue
			}
			t.subs[typ] = append(t.subs[typ], ep)
		}
	}
	ids := make([]string, len(t.Endpoints))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for j, ep := range t.Endpoints {
		g.Go(func() error {
			s := &controlv1.EndpointSettings{}
			if spec.Settings != nil {
				s = cloneSettings(spec.Settings)
			}
			if j < len(spec.Each) {
				s = cloneSettings(spec.Each[j])
			}
			s.Url = b.recv.URL(ep)
			if b.destination != nil {
				s.Url = b.destination(ep)
			}
			if b.pullEndpoints {
				s.Url, s.Delivery = "", "pull"
			}
			s.EventTypes = types[j]
			if spec.Behaviour != nil {
				b.recv.SetBehaviour(ep, *spec.Behaviour)
			}
			id, secret, err := b.api.CreateEndpoint(gctx, t.ID, ep, s)
			if err != nil {
				return err
			}
			ids[j] = id
			return b.recv.SetSecret(ep, secret)
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for j, id := range ids {
		t.names[id] = t.Endpoints[j]
	}
	b.ledger.addTenant(t)
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
	b.mu.Unlock()
	return t, nil
}

func cloneSettings(s *controlv1.EndpointSettings) *controlv1.EndpointSettings {
	return proto.CloneOf(s)
}

// counts returns the awaited deliveries the node announced, those
// received (2xx, by webhook-id, whatever the ledger says of them), the
// events published and the attempts on the awaited endpoints: cheap
// figures for pacing and progress.
func (b *Bench) counts() (announced, received, events, attempts int64) {
	b.mu.Lock()
	events = b.events
	eps := b.awaitedEPs
	b.mu.Unlock()
	received, attempts = b.recv.SucceededFor(eps)
	return b.ledger.announcedAwaited(), received, events, attempts
}

func (b *Bench) backlog() int64 {
	p, r, _, _ := b.counts()
	return p - r
}

// Await waits until every delivery of the awaited tenants that the node
// announced was received with a 2xx, printing progress, for at most
// timeout (the ledger's deliveries the node did not announce never come:
// they are counted lost, not awaited). It fails with ErrNoDelivery when
// nothing arrived within cfg.FirstDelivery of the first publish.
func (b *Bench) Await(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		p, r, _, attempts := b.counts()
		// r counts every webhook-id answered 2xx, unplanned ones too:
		// only when it is high enough are the announced ids looked up.
		missing := p - r
		if r >= p {
			if missing = b.ledger.unreceived(b.recv); missing == 0 {
				return nil
			}
		}
		b.mu.Lock()
		first := b.firstAck
		b.mu.Unlock()
		if attempts == 0 && !first.IsZero() && time.Since(first) > b.cfg.FirstDelivery {
			return fmt.Errorf("%w within %v of the first publish (%d deliveries planned); the node's log:\n%s",
				ErrNoDelivery, b.cfg.FirstDelivery, p, b.nodeTail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d deliveries the node planned not received within %v", missing, p, timeout)
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
		p, r, ev, _ := b.counts()
		st := b.recv.Stats()
		fmt.Fprintf(b.stderr, "hookbench: %5.0fs published %d events, delivered %d of %d planned (pending %d), receiver: %d requests, %d duplicates\n",
			time.Since(start).Seconds(), ev, r, p, max(0, p-r), st.Requests, st.Duplicates)
	}
}

// Confirm asks the node for its status counts of the awaited tenants (all
// phases), until nothing is pending and the succeeded count matches the
// ledger's expected deliveries, or timeout.
func (b *Bench) Confirm(ctx context.Context, s *Summary, timeout time.Duration) error {
	want := b.ledger.expectedBy()
	var total int64
	for _, n := range want {
		total += n
	}
	var last error
	var listed int64 // deliveries listed, over every read: what the nodes served
	defer func() { addExtra(s, map[string]float64{"confirm_listed": float64(listed)}) }()
	// countAll counts every succeeded and failed delivery: a read of the
	// whole history.
	countAll := func() (bool, error) {
		var ok, failed int64
		defer func() { listed += ok + failed }()
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
				last = fmt.Errorf("tenant %s: node says %d succeeded, %d expected", t.ID, sc, n)
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
		listed += pending
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

// Summarize counts the ledger's events of the given phases (all phases
// when none are given) against the receiver: the deliveries of the
// awaited tenants, their latency, and the checks of every tenant (see
// ledger.count).
func (b *Bench) Summarize(name string, since time.Time, phases ...int) Summary {
	return b.summarize(name, scope{phases: phases, since: since})
}

// summarize is Summarize over a scope.
func (b *Bench) summarize(name string, sc scope) Summary {
	s := Summary{Scenario: name}
	since, phases := sc.since, sc.phases
	inPhase := func(p int) bool { return len(phases) == 0 || slices.Contains(phases, p) }
	b.mu.Lock()
	var pubs []time.Duration
	for p, ds := range b.publishLat {
		if inPhase(p) {
			pubs = append(pubs, ds...)
		}
	}
	b.mu.Unlock()

	t := b.ledger.count(b.recv, sc)
	s.Expected, s.Planned, s.Deliveries, s.Checks, s.Attempts = t.Expected, t.Planned, t.Deliveries, t.Checks, t.Attempts
	s.Notes = append(s.Notes, t.Examples...)
	s.BadSignature = b.recv.Stats().BadSignature
	if s.Expected > 0 {
		s.AttemptsPerDelivery = round(float64(s.Attempts)/float64(s.Expected), 3)
	}
	if s.Deliveries > 0 && t.lastOK.After(since) {
		s.DeliveriesPerSec = round(float64(s.Deliveries)/t.lastOK.Sub(since).Seconds(), 1)
	}
	p := percentiles(t.firstAttempt, 0.5, 0.99, 1)
	s.FirstAttemptP50, s.FirstAttemptP99, s.FirstAttemptMax = p[0], p[1], p[2]
	s.PublishP99 = percentiles(pubs, 0.99)[0]
	// A batch is acknowledged after its last event, and its first events
	// are often delivered before that: the figures from the call's start
	// bound the latency from above where those from the ack bound it from
	// below.
	q := percentiles(t.fromSent, 0.5, 0.99)
	s.Extra = map[string]float64{"from_publish_call_p50_ms": q[0], "from_publish_call_p99_ms": q[1],
		"received_before_ack": float64(t.beforeAck)}
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
	_, all := b.ledger.expected()
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
