package endpoint_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
)

// bench is a node without the cluster: the embedded log in memory, the
// projections runner with registry, due and history, an actor system, the
// real egress client (loopback allowed) and an injected clock.
type bench struct {
	t      *testing.T
	log    events.Log
	sys    *actor.ActorSystem
	clk    *clock
	runner *projections.Runner
	reg    *registry.Registry
	hist   *history.History
	wakes  *wakeRouter
	cfg    endpoint.Config
}

// wakeRouter is the node's due.Waker: a Wake command to each grain of the
// endpoint.
type wakeRouter struct {
	mu   sync.Mutex // guards pids
	sys  *actor.ActorSystem
	pids map[string][]*actor.PID
}

func (w *wakeRouter) Wake(endpointID string) {
	w.mu.Lock()
	pids := w.pids[endpointID]
	w.mu.Unlock()
	for _, pid := range pids {
		w.sys.Root.Send(pid, &internalv1.EndpointCommand{Command: &internalv1.EndpointCommand_Wake{Wake: &internalv1.Wake{}}})
	}
}

func (w *wakeRouter) all() {
	w.mu.Lock()
	ids := make([]string, 0, len(w.pids))
	for id := range w.pids {
		ids = append(ids, id)
	}
	w.mu.Unlock()
	for _, id := range ids {
		w.Wake(id)
	}
}

func newBench(t *testing.T) *bench {
	t.Helper()
	return newBenchWith(t, nil)
}

// newBenchWith is newBench on the log as wrap returns it (a fault
// injecting log); nil means the log itself.
func newBenchWith(t *testing.T, wrap func(events.Log) events.Log) *bench {
	t.Helper()
	b := &bench{t: t, log: openLog(t), clk: &clock{now: t0}}
	if wrap != nil {
		b.log = wrap(b.log)
	}
	b.sys = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	b.wakes = &wakeRouter{sys: b.sys, pids: map[string][]*actor.PID{}}
	d := b.openProjections()
	tasks := &sync.WaitGroup{}
	t.Cleanup(tasks.Wait) // after the grains stopped, before the runner closes
	client := attempt.NewClient(attempt.ClientConfig{Policy: &attempt.Policy{AllowPrivate: true}})
	t.Cleanup(client.CloseIdleConnections)
	t.Cleanup(b.sys.Shutdown)
	b.cfg = endpoint.Config{
		Log: b.log, Keyring: keyring(t), Policy: &attempt.Policy{AllowPrivate: true}, Now: b.clk.Now, Logger: quiet,
		Due: d, Sequences: d, Projections: b.runner, History: b.hist, Attempts: client,
		Jitter: func() float64 { return 0.5 }, Tasks: tasks,
	}
	return b
}

// openProjections opens the node's projections on a fresh store over the
// bench's log (b.runner, b.hist) and returns its due index; they run
// until the test ends.
func (b *bench) openProjections() *due.Due {
	t := b.t
	t.Helper()
	r, err := projections.Open(b.log, projections.Config{Dir: "/proj", FS: vfs.NewMem(), Logger: quiet, Now: b.clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	b.runner = r
	if b.reg, err = registry.New(r); err != nil {
		t.Fatal(err)
	}
	d, err := due.New(r, due.Config{Waker: b.wakes, Now: b.clk.Now, SweepInterval: 20 * time.Millisecond, Logger: quiet, Tokens: (*seal.Payloads)(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if b.hist, err = history.New(r, history.Config{Log: b.log, Now: b.clk.Now, Logger: quiet}); err != nil {
		t.Fatal(err)
	}
	r.Own(events.AllPartitions()) // a node alone owns every partition
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	wg.Go(func() { d.Run(ctx) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		r.Close()
	})
	return d
}

// rebuild gives the bench's grains projections built afresh from the log
// as it stands (a member building a partition): grains spawned from now
// on use them.
func (b *bench) rebuild() {
	b.t.Helper()
	d := b.openProjections()
	b.cfg.Due, b.cfg.Sequences, b.cfg.Projections, b.cfg.History = d, d, b.runner, b.hist
}

// spawn starts a grain of endpointID with the bench's config; it stops at
// the end of the test.
func (b *bench) spawn(endpointID string) *actor.PID {
	b.t.Helper()
	pid := b.sys.Root.Spawn(endpoint.Props(b.cfg, endpointID))
	b.wakes.mu.Lock()
	b.wakes.pids[endpointID] = append(b.wakes.pids[endpointID], pid)
	b.wakes.mu.Unlock()
	b.t.Cleanup(func() { b.sys.Root.StopFuture(pid).Wait() })
	return pid
}

// endpoint spawns a grain and creates its endpoint for tenant with url.
func (b *bench) endpoint(tenant, endpointID, url string, edit func(*controlv1.EndpointSettings)) *actor.PID {
	b.t.Helper()
	pid := b.spawn(endpointID)
	s := &controlv1.EndpointSettings{Url: url, EventTypes: []string{"*"}}
	if edit != nil {
		edit(s)
	}
	mustOK(b.t, ask(b.t, b.sys, pid, cmd(tenant, &controlv1.CreateEndpointRequest{Settings: s})))
	return pid
}

// publish appends an event planned for endpoints, as the publish handler
// does, and returns the delivery ids.
func (b *bench) publish(tenant, eventID string, endpoints ...string) []string {
	b.t.Helper()
	return b.append(b.event(tenant, eventID, endpoints...))
}

// event returns the event and the plan that publish appends.
func (b *bench) event(tenant, eventID string, endpoints ...string) (*hooklinev1.EventPublished, *hooklinev1.DeliveriesPlanned) {
	at := b.clk.Now()
	pub := &hooklinev1.EventPublished{
		TenantId: tenant, EventId: eventID, EventType: "invoice.paid", Payload: []byte(`{"invoice":"` + eventID + `"}`),
		ContentType: "application/json", OccurredAt: timestamppb.New(at), At: timestamppb.New(at),
	}
	plan := &hooklinev1.DeliveriesPlanned{TenantId: tenant, EventId: eventID, EventType: "invoice.paid", Chunks: 1,
		At: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(24 * time.Hour))}
	for _, ep := range endpoints {
		id := events.DeliveryID(tenant, eventID, ep)
		plan.Deliveries = append(plan.Deliveries, &hooklinev1.PlannedDelivery{DeliveryId: id, EndpointId: ep, ConfigVersion: 1})
	}
	return pub, plan
}

// append appends an event and its plan to the event's stream, and returns
// the delivery ids.
func (b *bench) append(pub *hooklinev1.EventPublished, plan *hooklinev1.DeliveriesPlanned) []string {
	b.t.Helper()
	eventID, stream := pub.GetEventId(), events.EventStream(pub.GetTenantId(), pub.GetEventId())
	var ids []string
	for _, d := range plan.GetDeliveries() {
		ids = append(ids, d.GetDeliveryId())
	}
	e1, err := events.Encode(pub, "publish/"+eventID, stream)
	if err != nil {
		b.t.Fatal(err)
	}
	e2, err := events.Encode(plan, "plan/"+eventID, stream)
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.log.Append(context.Background(), stream, events.NoStream{}, e1, e2); err != nil {
		b.t.Fatal(err)
	}
	return ids
}

// advance moves the clock and wakes every grain, as the due projection's
// timers and sweeper do on a real clock.
func (b *bench) advance(d time.Duration) {
	b.clk.Add(d)
	b.wakes.all()
}

// delivery returns the decoded events of a delivery stream.
func (b *bench) delivery(id string) []proto.Message {
	b.t.Helper()
	return decodeAll(b.t, b.log, events.DeliveryStream(id))
}

func decodeAll(t *testing.T, log events.Log, stream string) []proto.Message {
	t.Helper()
	recs, err := log.ReadStream(context.Background(), stream, events.Forwards, 0, 10_000)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatal(err)
	}
	out := make([]proto.Message, len(recs))
	for i := range recs {
		if out[i], err = events.Decode(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// status returns a delivery's status in the history projection.
func (b *bench) status(tenant, id string) history.Delivery {
	b.t.Helper()
	d, _, err := b.hist.Get(tenant, id)
	if err != nil {
		b.t.Fatal(err)
	}
	return d
}

// waitStatus polls the history until every delivery has status s.
func (b *bench) waitStatus(tenant string, s history.Status, ids ...string) {
	b.t.Helper()
	waitUntil(b.t, fmt.Sprintf("%d deliveries %s", len(ids), s), func() bool {
		for _, id := range ids {
			if b.status(tenant, id).Status != s {
				return false
			}
		}
		return true
	})
}

// waitEvents polls a delivery stream until it holds n events and returns
// them.
func (b *bench) waitEvents(id string, n int) []proto.Message {
	b.t.Helper()
	var got []proto.Message
	waitUntil(b.t, fmt.Sprintf("%d events on %s", n, id), func() bool {
		got = b.delivery(id)
		return len(got) >= n
	})
	return got
}

// waitUntil polls cond every few milliseconds for up to 15 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not synchronisation
	}
}

// receiver is an httptest receiver that records every request and answers
// as its respond function says.
type receiver struct {
	*httptest.Server
	mu      sync.Mutex // guards the fields below
	hits    []hit
	respond func(w http.ResponseWriter, r *http.Request, n int) // n: this webhook-id's hit number
	active  int
	peak    int
}

type hit struct {
	id, timestamp, signature string
	key, sequence            string    // webhook-ordering-key, webhook-sequence
	at                       time.Time // real time of arrival
}

func newReceiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) *receiver {
	t.Helper()
	rc := &receiver{respond: respond}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc.mu.Lock()
		h := hit{id: r.Header.Get("webhook-id"), timestamp: r.Header.Get("webhook-timestamp"), signature: r.Header.Get("webhook-signature"), at: time.Now(),
			key: r.Header.Get("webhook-ordering-key"), sequence: r.Header.Get("webhook-sequence")}
		rc.hits = append(rc.hits, h)
		n := 0
		for _, x := range rc.hits {
			if x.id == h.id {
				n++
			}
		}
		rc.active++
		rc.peak = max(rc.peak, rc.active)
		respond := rc.respond
		rc.mu.Unlock()
		defer func() { rc.mu.Lock(); rc.active--; rc.mu.Unlock() }()
		if respond != nil {
			respond(w, r, n)
		}
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) setRespond(f func(w http.ResponseWriter, r *http.Request, n int)) {
	rc.mu.Lock()
	rc.respond = f
	rc.mu.Unlock()
}

func (rc *receiver) count(id string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n := 0
	for _, h := range rc.hits {
		if id == "" || h.id == id {
			n++
		}
	}
	return n
}

func (rc *receiver) all() []hit {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]hit(nil), rc.hits...)
}

func status(code int) func(w http.ResponseWriter, r *http.Request, n int) {
	return func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(code) }
}

// logWatch is a log handler that records the messages of every record, so
// that a test can wait for a grain to have reached a point of its work.
type logWatch struct {
	mu   sync.Mutex // guards seen
	seen []string
}

func (w *logWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *logWatch) WithAttrs([]slog.Attr) slog.Handler { return w }

func (w *logWatch) WithGroup(string) slog.Handler { return w }

func (w *logWatch) Handle(_ context.Context, r slog.Record) error {
	line := r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	w.mu.Lock()
	w.seen = append(w.seen, line)
	w.mu.Unlock()
	return nil
}

// saw reports whether a record whose message and attributes contain s was
// logged.
func (w *logWatch) saw(s string) bool { return w.sawWith(s) }

// sawWith reports whether a record containing every one of parts was
// logged.
func (w *logWatch) sawWith(parts ...string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.seen {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(m, p)
		}
		if all {
			return true
		}
	}
	return false
}
