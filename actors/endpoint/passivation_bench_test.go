package endpoint_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/cluster"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// BenchmarkPassivation measures what idle endpoint grains cost: N
// endpoints (100,000; HOOKLINE_BENCH_ENDPOINTS sets another count) each
// receive one delivery, through the real log and projections on disk and
// an HTTP receiver on loopback. It reports the live heap once every
// delivery is recorded (every grain active: heap_active_MB) and again once
// the quiet period (5 min; HOOKLINE_BENCH_QUIET sets another, longer than
// the deliveries take) has passed and every grain has passivated
// (heap_idle_MB), and the bytes per grain between the two. Run it alone:
//
//	go test -run '^$' -bench BenchmarkPassivation -benchtime 1x -timeout 1h ./actors/endpoint
func BenchmarkPassivation(b *testing.B) {
	n := 100_000
	if s := os.Getenv("HOOKLINE_BENCH_ENDPOINTS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	quiet := 5 * time.Minute
	if s := os.Getenv("HOOKLINE_BENCH_QUIET"); s != "" {
		var err error
		if quiet, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		r := passivationRun(b, n, quiet)
		b.ReportMetric(r.activeMB, "heap_active_MB")
		b.ReportMetric(r.idleMB, "heap_idle_MB")
		b.ReportMetric(r.baseMB, "heap_before_MB")
		b.ReportMetric((r.activeMB-r.idleMB)*(1<<20)/float64(n), "B/grain")
		b.ReportMetric(float64(r.live), "grains_after_quiet")
		b.Logf("%d endpoints: heap %.0f MB before any grain, %.0f MB with every grain active after its delivery, %.0f MB after the quiet period (%d grains left); delivered in %v, passivated %v after the last delivery",
			n, r.baseMB, r.activeMB, r.idleMB, r.live, r.deliver.Round(time.Second), r.passivate.Round(100*time.Millisecond))
	}
}

type passivationResult struct {
	baseMB, activeMB, idleMB float64
	live                     int
	deliver, passivate       time.Duration
}

func passivationRun(b *testing.B, n int, quiet time.Duration) passivationResult {
	dir := b.TempDir()
	quietLog := slog.New(slog.DiscardHandler)
	log, err := embedded.Open(embedded.Config{Dir: filepath.Join(dir, "log"), Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	runner, err := projections.Open(log, projections.Config{Dir: filepath.Join(dir, "proj"), Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	defer runner.Close()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quietLog }))
	defer sys.Shutdown()
	router := &pidRouter{sys: sys, pids: map[string]*actor.PID{}}
	idx, err := due.New(runner, due.Config{Waker: router, Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	hist, err := history.New(runner, history.Config{Logger: quietLog})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { runner.Run(ctx) })
	wg.Go(func() { idx.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()

	var got atomic.Int64
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		got.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer rc.Close()
	client := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{AllowPrivate: true}})
	defer client.CloseIdleConnections()
	tasks := &sync.WaitGroup{}
	defer tasks.Wait()
	kr := keyring(b)
	props := endpoint.Props(endpoint.Config{
		Log: log, Keyring: kr, Policy: &attempt.Policy{AllowPrivate: true}, Logger: quietLog,
		Due: idx, Sequences: idx, Projections: runner, History: hist, Attempts: client, Tasks: tasks, IdleAfter: quiet,
	}, "")

	base := heapMB()
	start := time.Now()
	// Create the endpoints, many at once (the log groups their fsyncs). The
	// grains share one Props, as a node's kind does, and learn their
	// identity as the cluster tells it.
	router.props = props
	parallel(n, 256, func(i int) {
		id := fmt.Sprint("ep_", i)
		pid := router.pid(id)
		res, err := sys.Root.RequestFuture(pid, &internalv1.EndpointCommand{TenantId: "acme", Command: &internalv1.EndpointCommand_Create{
			Create: &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: rc.URL + "/in", EventTypes: []string{"*"}}},
		}}, time.Minute).Result()
		if err != nil || res.(*internalv1.EndpointReply).GetError() != nil {
			b.Errorf("create %s: %v %v", id, res, err)
		}
	})
	// One event per endpoint, published as the publish handler does.
	parallel(n, 64, func(i int) {
		eventID, ep := fmt.Sprint("evt_", i), fmt.Sprint("ep_", i)
		if err := publishOne(log, "acme", eventID, ep); err != nil {
			b.Error(err)
		}
	})
	for got.Load() < int64(n) {
		if time.Since(start) > 30*time.Minute {
			b.Fatalf("%d of %d delivered after 30 min", got.Load(), n)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	// Every outcome recorded: the grains are idle from here.
	head, err := log.Head(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if err := runner.WaitFor(context.Background(), head); err != nil {
		b.Fatal(err)
	}
	delivered := time.Since(start)
	active := heapMB()
	if live := liveActors(sys); live < n*9/10 {
		b.Fatalf("only %d grains active after the deliveries, want about %d", live, n)
	}
	last := time.Now()
	for liveActors(sys) > 0 && time.Since(last) < quiet+2*time.Minute {
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	res := passivationResult{
		baseMB: base, activeMB: active, idleMB: heapMB(), live: liveActors(sys),
		deliver: delivered, passivate: time.Since(last),
	}
	return res
}

// pidRouter activates the benchmark's grains as the cluster's placement
// does: one per endpoint id, spawned on its first message and again on the
// first message after it passivated. It is the due projection's Waker.
type pidRouter struct {
	sys   *actor.ActorSystem
	props *actor.Props
	mu    sync.Mutex // guards pids
	pids  map[string]*actor.PID
}

// pid returns the grain of id, activating it if it is not active.
func (r *pidRouter) pid(id string) *actor.PID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pid, ok := r.pids[id]; ok {
		if _, alive := r.sys.ProcessRegistry.GetLocal(pid.Id); alive {
			return actor.NewPID(pid.Address, pid.Id)
		}
	}
	pid := r.sys.Root.Spawn(r.props)
	r.sys.Root.Send(pid, &cluster.ClusterInit{Identity: &cluster.ClusterIdentity{Identity: id, Kind: endpoint.Kind}})
	// Keep a copy never sent to: a PID remembers the process it reached,
	// and would keep a passivated grain in memory (see cluster.Node).
	r.pids[id] = actor.NewPID(pid.Address, pid.Id)
	return pid
}

func (r *pidRouter) Wake(endpointID string) {
	r.sys.Root.Send(r.pid(endpointID), &internalv1.EndpointCommand{Command: &internalv1.EndpointCommand_Wake{Wake: &internalv1.Wake{}}})
}

// publishOne appends an event planned for one endpoint, as the publish
// handler does.
func publishOne(log events.Log, tenant, eventID, endpointID string) error {
	at := timestamppb.Now()
	stream := events.EventStream(tenant, eventID)
	pub := &hooklinev1.EventPublished{TenantId: tenant, EventId: eventID, EventType: "invoice.paid",
		Payload: []byte(`{"invoice":"` + eventID + `"}`), ContentType: "application/json", OccurredAt: at, At: at}
	plan := &hooklinev1.DeliveriesPlanned{TenantId: tenant, EventId: eventID, EventType: "invoice.paid", Chunks: 1, At: at,
		ExpiresAt:  timestamppb.New(at.AsTime().Add(24 * time.Hour)),
		Deliveries: []*hooklinev1.PlannedDelivery{{DeliveryId: events.DeliveryID(tenant, eventID, endpointID), EndpointId: endpointID, ConfigVersion: 1}}}
	e1, err := events.Encode(pub, "publish/"+eventID, stream)
	if err != nil {
		return err
	}
	e2, err := events.Encode(plan, "plan/"+eventID, stream)
	if err != nil {
		return err
	}
	_, err = log.Append(context.Background(), stream, events.NoStream{}, e1, e2)
	return err
}

// parallel runs fn(0..n-1) on workers goroutines.
func parallel(n, workers int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}

// heapMB returns the live heap after a collection, in MiB.
func heapMB() float64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return float64(m.HeapAlloc) / (1 << 20)
}

// liveActors counts the actors of sys (here, the grains), not its
// built-in processes (dead letters, event stream) nor futures.
func liveActors(sys *actor.ActorSystem) int {
	n := 0
	for _, m := range sys.ProcessRegistry.LocalPIDs.LocalPIDs {
		for _, p := range m.Items() {
			if _, ok := p.(*actor.ActorProcess); ok {
				n++
			}
		}
	}
	return n
}
