package due_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

var (
	quiet = slog.New(slog.DiscardHandler)
	t0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// recorder is a Waker that records wakes and signals each one.
type recorder struct {
	mu    sync.Mutex
	wakes map[string]int
	ch    chan string
}

func newRecorder() *recorder { return &recorder{wakes: map[string]int{}, ch: make(chan string, 1024)} }

func (r *recorder) Wake(endpointID string) {
	r.mu.Lock()
	r.wakes[endpointID]++
	r.mu.Unlock()
	select {
	case r.ch <- endpointID:
	default:
	}
}

func (r *recorder) count(endpointID string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wakes[endpointID]
}

func (r *recorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.wakes)
	for len(r.ch) > 0 {
		<-r.ch
	}
}

// waitWake waits for a wake of endpointID.
func (r *recorder) waitWake(t *testing.T, endpointID string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ep := <-r.ch:
			if ep == endpointID {
				return
			}
		case <-deadline:
			t.Fatalf("no wake for %s", endpointID)
		}
	}
}

// clock is an injected clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }

type fixture struct {
	t    *testing.T
	log  *embedded.Log
	head events.Position
	n    int
}

func newFixture(t *testing.T) *fixture {
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &fixture{t: t, log: l}
}

func (f *fixture) emit(stream string, expected events.ExpectedRevision, msgs ...proto.Message) {
	f.t.Helper()
	var evs []events.Event
	for _, m := range msgs {
		f.n++
		ev, err := events.Encode(m, fmt.Sprintf("test %d", f.n), stream)
		if err != nil {
			f.t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := f.log.Append(context.Background(), stream, expected, evs...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.head = res.Position
}

// publish appends EventPublished + DeliveriesPlanned, one delivery
// "d-{eventID}-{endpoint}" per endpoint, planned at.
func (f *fixture) publish(eventID string, at time.Time, endpoints ...string) {
	f.t.Helper()
	planned := &hooklinev1.DeliveriesPlanned{
		TenantId: "acme", EventId: eventID, EventType: "invoice.paid",
		At: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(24 * time.Hour)), Chunks: 1,
	}
	for _, ep := range endpoints {
		planned.Deliveries = append(planned.Deliveries, &hooklinev1.PlannedDelivery{DeliveryId: "d-" + eventID + "-" + ep, EndpointId: ep, ConfigVersion: 3})
	}
	f.emit(events.EventStream("acme", eventID), events.NoStream{},
		&hooklinev1.EventPublished{TenantId: "acme", EventId: eventID, EventType: "invoice.paid", Payload: []byte(`{}`), At: timestamppb.New(at)},
		planned)
}

func attempt(deliveryID string, n int32) *hooklinev1.Attempt {
	return &hooklinev1.Attempt{TenantId: "acme", DeliveryId: deliveryID, EndpointId: "A", EventId: "x", EventType: "invoice.paid", Number: n, ConfigVersion: 3, FinishedAt: timestamppb.New(t0)}
}

func (f *fixture) outcome(deliveryID string, m proto.Message) {
	f.t.Helper()
	f.emit(events.DeliveryStream(deliveryID), events.Any{}, m)
}

func (f *fixture) failed(deliveryID string, n int32, next time.Time) {
	f.t.Helper()
	m := &hooklinev1.AttemptFailed{Attempt: attempt(deliveryID, n), Retryable: !next.IsZero()}
	if !next.IsZero() {
		m.NextAttemptAt = timestamppb.New(next)
	}
	f.outcome(deliveryID, m)
}

// open runs a due index on a projection store in fs until the test ends,
// caught up with the log.
func (f *fixture) open(fs vfs.FS, cfg due.Config) (*due.Due, *projections.Runner) {
	d, r, _ := f.openStop(fs, cfg)
	return d, r
}

// openStop is open that also returns a function closing the store.
func (f *fixture) openStop(fs vfs.FS, cfg due.Config) (*due.Due, *projections.Runner, func()) {
	f.t.Helper()
	r, err := projections.Open(f.log, projections.Config{Dir: "proj", FS: fs, Logger: quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	cfg.Logger = quiet
	d, err := due.New(r, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	r.Own(events.AllPartitions())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 2)
	go func() { done <- r.Run(ctx) }()
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			<-done
			r.Close()
		})
	}
	f.t.Cleanup(stop)
	f.sync(r)
	return d, r, stop
}

func (f *fixture) sync(r *projections.Runner) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitForPartitions(ctx, r.Owned(), f.head); err != nil {
		f.t.Fatal(err)
	}
}

// ids lists the delivery ids and classes of items.
func ids(items []due.Item) []string {
	var out []string
	for _, it := range items {
		s := it.DeliveryID + "/" + it.Class.String()
		if it.Manual {
			s += "/manual"
		}
		out = append(out, s)
	}
	return out
}

func dueIDs(t *testing.T, d *due.Due, endpointID string, now time.Time, limit int) []string {
	t.Helper()
	items, err := d.Pull(endpointID, now, limit)
	if err != nil {
		t.Fatal(err)
	}
	return ids(items)
}

func TestDueOrderRescheduleAndRemoval(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	rec := newRecorder()
	fs := vfs.NewMem()
	d, r, stop := f.openStop(fs, due.Config{Waker: rec, Now: clk.Now, SweepInterval: time.Hour})

	f.publish("e1", t0, "A", "B")
	f.publish("e2", t0.Add(time.Second), "A")
	f.publish("e3", t0.Add(2*time.Second), "A")
	f.sync(r)
	if rec.count("A") == 0 || rec.count("B") == 0 {
		t.Errorf("wakes after planning = %v, want A and B", rec.wakes)
	}
	if diff := cmp.Diff([]string{"d-e1-A/new", "d-e2-A/new", "d-e3-A/new"}, dueIDs(t, d, "A", t0, 0)); diff != "" {
		t.Errorf("Due(A) after planning (-want +got):\n%s", diff)
	}
	it, ok, err := d.Get("d-e1-A")
	want := due.Item{DeliveryID: "d-e1-A", TenantID: "acme", EventID: "e1", EventType: "invoice.paid", EndpointID: "A",
		ConfigVersion: 3, Class: due.ClassNew, DueAt: t0, PlannedAt: t0, ExpiresAt: t0.Add(24 * time.Hour)}
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if diff := cmp.Diff(want, it); diff != "" {
		t.Errorf("Get(d-e1-A) (-want +got):\n%s", diff)
	}

	// Retries come after all new work, in due-time order, once due.
	f.failed("d-e1-A", 1, t0.Add(10*time.Minute))
	f.failed("d-e2-A", 1, t0.Add(5*time.Minute))
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e3-A/new"}, dueIDs(t, d, "A", t0.Add(time.Minute), 0)); diff != "" {
		t.Errorf("Due(A) before retries are due (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d-e3-A/new", "d-e2-A/retry"}, dueIDs(t, d, "A", t0.Add(6*time.Minute), 0)); diff != "" {
		t.Errorf("Due(A) at +6m (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d-e3-A/new", "d-e2-A/retry", "d-e1-A/retry"}, dueIDs(t, d, "A", t0.Add(time.Hour), 0)); diff != "" {
		t.Errorf("Due(A) at +1h (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"d-e3-A/new", "d-e2-A/retry"}, dueIDs(t, d, "A", t0.Add(time.Hour), 2)); diff != "" {
		t.Errorf("Due(A) limit 2 (-want +got):\n%s", diff)
	}
	if it, _, _ := d.Get("d-e1-A"); it.Attempts != 1 || !it.DueAt.Equal(t0.Add(10*time.Minute)) {
		t.Errorf("rescheduled item = %+v", it)
	}
	if s := d.Stats(t0.Add(time.Hour)); s.Endpoints != 2 || s.OldestNew != time.Hour || s.OldestRetry != 55*time.Minute {
		t.Errorf("Stats = %+v, want 2 endpoints, new 1h, retry 55m", s)
	}

	// Success, terminal failure and expiry remove.
	f.outcome("d-e3-A", &hooklinev1.AttemptSucceeded{Attempt: attempt("d-e3-A", 1)})
	f.failed("d-e2-A", 2, time.Time{})
	f.outcome("d-e1-B", &hooklinev1.DeliveryExpired{TenantId: "acme", EndpointId: "B", DeliveryId: "d-e1-B"})
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e1-A/retry"}, dueIDs(t, d, "A", t0.Add(time.Hour), 0)); diff != "" {
		t.Errorf("Due(A) after outcomes (-want +got):\n%s", diff)
	}
	if got := dueIDs(t, d, "B", t0.Add(time.Hour), 0); len(got) != 0 {
		t.Errorf("Due(B) after expiry = %v, want none", got)
	}

	// A replay brings an ended delivery back once, and moves a pending
	// one up.
	rec.reset()
	clk.Set(t0.Add(5 * time.Minute))
	f.outcome("d-e2-A", &hooklinev1.ReplayRequested{TenantId: "acme", EndpointId: "A", DeliveryId: "d-e2-A", EventId: "e2", At: timestamppb.New(t0.Add(2 * time.Minute))})
	f.outcome("d-e1-A", &hooklinev1.ReplayRequested{TenantId: "acme", EndpointId: "A", DeliveryId: "d-e1-A", EventId: "e1", At: timestamppb.New(t0.Add(3 * time.Minute))})
	f.sync(r)
	rec.waitWake(t, "A")
	if diff := cmp.Diff([]string{"d-e2-A/retry/manual", "d-e1-A/retry/manual"}, dueIDs(t, d, "A", t0.Add(4*time.Minute), 0)); diff != "" {
		t.Errorf("Due(A) after replays (-want +got):\n%s", diff)
	}
	f.failed("d-e2-A", 3, time.Time{})
	f.sync(r)
	if diff := cmp.Diff([]string{"d-e1-A/retry/manual"}, dueIDs(t, d, "A", t0.Add(4*time.Minute), 0)); diff != "" {
		t.Errorf("Due(A) after a failed replay (-want +got):\n%s", diff)
	}

	// The same answers from a store rebuilt from the log, and from the
	// same store reopened (summaries reloaded).
	at := t0.Add(time.Hour)
	wantItems, wantStats := dueIDs(t, d, "A", at, 0), d.Stats(at)
	rebuilt, _ := f.open(vfs.NewMem(), due.Config{Now: clk.Now, SweepInterval: time.Hour})
	stop()
	reopened, _ := f.open(fs, due.Config{Now: clk.Now, SweepInterval: time.Hour})
	for name, d := range map[string]*due.Due{"rebuilt": rebuilt, "reopened": reopened} {
		if diff := cmp.Diff(wantItems, dueIDs(t, d, "A", at, 0)); diff != "" {
			t.Errorf("Due(A) %s (-want +got):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantStats, d.Stats(at)); diff != "" {
			t.Errorf("Stats %s (-want +got):\n%s", name, diff)
		}
	}
}

func TestSweeperWakesStaleEndpoints(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0}
	rec := newRecorder()
	d, r := f.open(vfs.NewMem(), due.Config{Waker: rec, Now: clk.Now, SweepInterval: 5 * time.Millisecond, StaleAfter: time.Minute})

	f.publish("e1", t0, "A")
	f.publish("e2", t0.Add(50*time.Second), "B")
	f.sync(r)
	rec.waitWake(t, "A") // the immediate wake

	if n := d.Sweep(t0.Add(30 * time.Second)); n != 0 {
		t.Errorf("Sweep at +30s woke %d endpoints, want 0", n)
	}
	if n := d.Sweep(t0.Add(90 * time.Second)); n != 1 {
		t.Errorf("Sweep at +90s woke %d endpoints, want 1 (A)", n)
	}

	// The loop: once the clock passes the bound, A is woken again.
	rec.reset()
	clk.Set(t0.Add(2 * time.Minute))
	rec.waitWake(t, "A")
}

func TestRetryWakesWhenDue(t *testing.T) {
	f := newFixture(t)
	rec := newRecorder()
	_, r := f.open(vfs.NewMem(), due.Config{Waker: rec, SweepInterval: time.Hour})
	now := time.Now()
	f.publish("e1", now, "A")
	f.sync(r)
	rec.waitWake(t, "A")
	rec.reset()

	f.failed("d-e1-A", 1, time.Now().Add(100*time.Millisecond))
	f.sync(r)
	if n := rec.count("A"); n != 0 {
		t.Fatalf("woken %d times before the retry was due", n)
	}
	rec.waitWake(t, "A")
	if time.Now().Before(now.Add(100 * time.Millisecond)) {
		t.Error("woken before the retry was due")
	}
}

// TestPlannedAgainReplacesItsItem: a delivery planned again (its event's
// stream expired and the event was published again) replaces its item,
// whether the index took the first plan in this process or before a
// restart: the check that skips the lookup for deliveries never indexed
// must not skip it for these.
func TestPlannedAgainReplacesItsItem(t *testing.T) {
	f := newFixture(t)
	clk := &clock{now: t0.Add(3 * time.Hour)}
	fs := vfs.NewMem()
	f.publish("e1", t0, "A")
	_, _, stop := f.openStop(fs, due.Config{Now: clk.Now, SweepInterval: time.Hour})
	stop() // the first plan is on disk; the next process never put it

	again := func(eventID, stream string, at time.Time) {
		f.emit(events.EventStream("acme", stream), events.NoStream{}, &hooklinev1.DeliveriesPlanned{
			TenantId: "acme", EventId: eventID, EventType: "invoice.paid", At: timestamppb.New(at),
			ExpiresAt: timestamppb.New(at.Add(24 * time.Hour)), Chunks: 1,
			Deliveries: []*hooklinev1.PlannedDelivery{{DeliveryId: "d-" + eventID + "-A", EndpointId: "A", ConfigVersion: 3}},
		})
	}
	again("e1", "e1-again", t0.Add(time.Hour))
	f.publish("e2", t0, "A")
	d, r := f.open(fs, due.Config{Now: clk.Now, SweepInterval: time.Hour})
	again("e2", "e2-again", t0.Add(2*time.Hour)) // planned first in this process
	f.sync(r)
	items, err := d.Pull("A", clk.Now(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(items), []string{"d-e1-A/new", "d-e2-A/new"}; !cmp.Equal(got, want) {
		t.Fatalf("due for A after both were planned again: %v; want each once, as planned last", got)
	}
	for _, it := range items {
		if want := map[string]time.Time{"d-e1-A": t0.Add(time.Hour), "d-e2-A": t0.Add(2 * time.Hour)}[it.DeliveryID]; !it.DueAt.Equal(want) {
			t.Errorf("%s due at %v; want %v, its last plan", it.DeliveryID, it.DueAt, want)
		}
	}
}

// TestPromotionLoadsSummaries: a partition the node stood by for has no
// summaries and wakes nothing; once served, its endpoints' summaries are
// loaded from the store, those with new work are woken, and a retry
// wakes its endpoint when due (a timer set by the load).
func TestPromotionLoadsSummaries(t *testing.T) {
	f := newFixture(t)
	rec := newRecorder()
	d, r := f.open(vfs.NewMem(), due.Config{Waker: rec, SweepInterval: time.Hour})
	r.Serve(events.PartitionSet{}) // stands by for every partition
	now := time.Now()
	retry := now.Add(2 * time.Second)
	f.publish("e1", now, "A", "B")
	f.failed("d-e1-B", 1, retry)
	f.sync(r)
	if hs := d.Heads(); len(hs) != 0 {
		t.Fatalf("standing by: Heads = %v, want none", hs)
	}
	if n := rec.count("A") + rec.count("B"); n != 0 {
		t.Fatalf("standing by: %d wakes, want none", n)
	}

	r.Serve(events.AllPartitions())
	rec.waitWake(t, "A")
	got := map[string]due.Head{}
	for _, h := range d.Heads() {
		got[h.EndpointID] = h
	}
	want := map[string]due.Head{
		"A": {EndpointID: "A", OldestNew: now},
		"B": {EndpointID: "B", FirstRetry: retry},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Heads after the promotion (-want +got):\n%s", diff)
	}
	if time.Now().Before(retry) && rec.count("B") != 0 {
		t.Error("B woken before its retry was due")
	}
	rec.waitWake(t, "B")
	if time.Now().Before(retry) {
		t.Error("B woken before its retry was due")
	}
}
