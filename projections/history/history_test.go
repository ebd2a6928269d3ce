package history_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

var (
	quiet = slog.New(slog.DiscardHandler)
	t0    = time.Date(2026, 3, 1, 20, 0, 0, 0, time.UTC)
)

type fixture struct {
	t    testing.TB
	log  *embedded.Log
	head events.Position
	n    int
}

func newFixture(t testing.TB) *fixture {
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

// publish plans delivery "{eventID}-{endpoint}" for each endpoint.
func (f *fixture) publish(tenant, eventID, eventType string, at time.Time, endpoints ...string) {
	f.t.Helper()
	planned := &hooklinev1.DeliveriesPlanned{TenantId: tenant, EventId: eventID, EventType: eventType, At: timestamppb.New(at), Chunks: 1}
	for _, ep := range endpoints {
		planned.Deliveries = append(planned.Deliveries, &hooklinev1.PlannedDelivery{DeliveryId: eventID + "-" + ep, EndpointId: ep, ConfigVersion: 1})
	}
	f.emit(events.EventStream(tenant, eventID), events.NoStream{},
		&hooklinev1.EventPublished{TenantId: tenant, EventId: eventID, EventType: eventType, At: timestamppb.New(at)}, planned)
}

func attempt(deliveryID string, n int32, status int32) *hooklinev1.Attempt {
	return &hooklinev1.Attempt{DeliveryId: deliveryID, Number: n, HttpStatus: status, StartedAt: timestamppb.New(t0), FinishedAt: timestamppb.New(t0)}
}

func (f *fixture) succeed(deliveryID string, n int32) {
	f.emit(events.DeliveryStream(deliveryID), events.Any{}, &hooklinev1.AttemptSucceeded{Attempt: attempt(deliveryID, n, 200)})
}

func (f *fixture) fail(deliveryID string, n int32, retry bool) {
	m := &hooklinev1.AttemptFailed{Attempt: attempt(deliveryID, n, 500), Retryable: retry}
	if retry {
		m.NextAttemptAt = timestamppb.New(t0.Add(time.Hour))
	}
	f.emit(events.DeliveryStream(deliveryID), events.Any{}, m)
}

func (f *fixture) open(fs vfs.FS, cfg history.Config) (*history.History, *projections.Runner) {
	f.t.Helper()
	return f.openOwning(fs, cfg, events.AllPartitions())
}

// openOwning runs a history that owns the partitions of owned.
func (f *fixture) openOwning(fs vfs.FS, cfg history.Config, owned events.PartitionSet) (*history.History, *projections.Runner) {
	f.t.Helper()
	r, err := projections.Open(f.log, projections.Config{Dir: "proj", FS: fs, Logger: quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	r.Own(owned)
	cfg.Logger, cfg.Log = quiet, f.log
	h, err := history.New(r, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		<-done
		r.Close()
	})
	f.sync(r)
	return h, r
}

func (f *fixture) sync(r *projections.Runner) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitForPartitions(ctx, r.Owned(), f.head); err != nil {
		f.t.Fatal(err)
	}
}

// all pages through a search and returns the delivery ids, checking that
// no page is larger than the limit.
func all(t *testing.T, h *history.History, q history.Query) []string {
	t.Helper()
	var ids []string
	for range 1000 {
		p, err := h.Search(q)
		if err != nil {
			t.Fatal(err)
		}
		if q.Limit > 0 && len(p.Deliveries) > q.Limit {
			t.Fatalf("page of %d, limit %d", len(p.Deliveries), q.Limit)
		}
		for _, d := range p.Deliveries {
			ids = append(ids, d.ID)
		}
		if p.Next == "" {
			return ids
		}
		q.Cursor = p.Next
	}
	t.Fatal("search does not end")
	return nil
}

// seed plans six acme events over two days (e0 oldest, e5 newest) to
// endpoints A and B, and one globex event, then records outcomes.
func seed(f *fixture) {
	for i := range 6 {
		typ := "invoice.paid"
		if i%2 == 1 {
			typ = "order.shipped"
		}
		f.publish("acme", fmt.Sprintf("e%d", i), typ, t0.Add(time.Duration(i)*time.Hour), "A", "B")
	}
	f.publish("globex", "g0", "invoice.paid", t0, "A")
	f.succeed("e0-A", 1)     // succeeded
	f.fail("e1-A", 1, false) // failed
	f.fail("e2-A", 1, true)  // pending, retry scheduled
	f.fail("e3-A", 1, false) // failed, then replayed
	f.emit(events.DeliveryStream("e3-A"), events.Any{}, &hooklinev1.ReplayRequested{DeliveryId: "e3-A", At: timestamppb.New(t0)})
	f.succeed("e3-A", 2) // failed → succeeded
	f.succeed("e4-A", 1)
	f.fail("e4-A", 2, false) // succeeded stays succeeded
	f.emit(events.DeliveryStream("e5-B"), events.Any{}, &hooklinev1.DeliveryExpired{DeliveryId: "e5-B", At: timestamppb.New(t0)})
}

func TestSearch(t *testing.T) {
	f := newFixture(t)
	seed(f)
	h, _ := f.open(vfs.NewMem(), history.Config{})
	checkSearch(t, h)
	t.Run("rebuilt", func(t *testing.T) {
		h, _ := f.open(vfs.NewMem(), history.Config{})
		checkSearch(t, h)
	})
	t.Run("tiny scan budget", func(t *testing.T) {
		h, _ := f.open(vfs.NewMem(), history.Config{ScanBudget: 2})
		checkSearch(t, h)
	})
}

func checkSearch(t *testing.T, h *history.History) {
	newestFirst := []string{"e5-A", "e5-B", "e4-A", "e4-B", "e3-A", "e3-B", "e2-A", "e2-B", "e1-A", "e1-B", "e0-A", "e0-B"}
	for _, tc := range []struct {
		name string
		q    history.Query
		want []string
	}{
		{"tenant", history.Query{TenantID: "acme"}, newestFirst},
		{"tenant paged", history.Query{TenantID: "acme", Limit: 5}, newestFirst},
		{"endpoint", history.Query{TenantID: "acme", EndpointID: "A", Limit: 2}, []string{"e5-A", "e4-A", "e3-A", "e2-A", "e1-A", "e0-A"}},
		{"succeeded", history.Query{TenantID: "acme", Status: history.Succeeded}, []string{"e4-A", "e3-A", "e0-A"}},
		{"failed", history.Query{TenantID: "acme", Status: history.Failed}, []string{"e5-B", "e1-A"}},
		{"endpoint pending", history.Query{TenantID: "acme", EndpointID: "A", Status: history.Pending}, []string{"e5-A", "e2-A"}},
		{"type", history.Query{TenantID: "acme", EventType: "order.shipped", Limit: 1}, []string{"e5-A", "e5-B", "e3-A", "e3-B", "e1-A", "e1-B"}},
		{"type and endpoint", history.Query{TenantID: "acme", EventType: "order.shipped", EndpointID: "B"}, []string{"e5-B", "e3-B", "e1-B"}},
		{"time range", history.Query{TenantID: "acme", EndpointID: "A", Since: t0.Add(time.Hour), Until: t0.Add(4 * time.Hour)}, []string{"e3-A", "e2-A", "e1-A"}},
		{"other tenant", history.Query{TenantID: "globex"}, []string{"g0-A"}},
		{"nobody", history.Query{TenantID: "nobody"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, all(t, h, tc.q)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}

	d, ok, err := h.Get("acme", "e3-A")
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	attempts, err := h.Attempts(context.Background(), "e3-A")
	if err != nil {
		t.Fatalf("Attempts = %v", err)
	}
	if d.Status != history.Succeeded || d.Attempts != 2 || d.Replays != 1 || len(attempts) != 2 ||
		attempts[0].Succeeded || !attempts[1].Succeeded || attempts[1].Attempt.GetNumber() != 2 {
		t.Errorf("Get(e3-A) = %+v, %+v", d, attempts)
	}
	if d, _, _ := h.Get("acme", "e2-A"); d.Status != history.Pending || !d.NextAttemptAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("Get(e2-A) = %+v, want pending with a retry", d)
	}
	if d, _, _ := h.Get("acme", "e5-B"); d.Status != history.Failed || !d.Expired {
		t.Errorf("Get(e5-B) = %+v, want failed, expired", d)
	}
	if _, ok, err := h.Get("globex", "e3-A"); ok || err != nil {
		t.Errorf("Get from another tenant = %v, %v; want not found", ok, err)
	}
}

func TestCursors(t *testing.T) {
	f := newFixture(t)
	seed(f)
	h, _ := f.open(vfs.NewMem(), history.Config{})
	q := history.Query{TenantID: "acme", Limit: 2}
	p, err := h.Search(q)
	if err != nil || p.Next == "" {
		t.Fatalf("Search = %+v, %v", p, err)
	}
	tampered := []byte(p.Next)
	tampered[len(tampered)/2] ^= 1
	for name, q := range map[string]history.Query{
		"garbage":       {TenantID: "acme", Cursor: "!!"},
		"tampered":      {TenantID: "acme", Limit: 2, Cursor: string(tampered)},
		"other tenant":  {TenantID: "globex", Limit: 2, Cursor: p.Next},
		"other filters": {TenantID: "acme", Status: history.Failed, Limit: 2, Cursor: p.Next},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := h.Search(q); !errors.Is(err, history.ErrBadCursor) {
				t.Errorf("Search = %v, want ErrBadCursor", err)
			}
		})
	}
	if _, err := h.Search(history.Query{}); !errors.Is(err, history.ErrBadQuery) {
		t.Errorf("Search without tenant = %v, want ErrBadQuery", err)
	}
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	seed(f)
	h, r := f.open(vfs.NewMem(), history.Config{})
	// e0..e3 are planned on t0's day (20:00 to 23:00), e4 and e5 the next.
	// Cutoff at 00:30 the next day: t0's day goes whole, then e4 (00:00).
	n, err := h.Prune(context.Background(), t0.Add(4*time.Hour+30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 11 {
		t.Errorf("pruned %d, want 11 (e0..e4 to A and B, g0-A)", n)
	}
	if diff := cmp.Diff([]string{"e5-A", "e5-B"}, all(t, h, history.Query{TenantID: "acme"})); diff != "" {
		t.Errorf("after prune (-want +got):\n%s", diff)
	}
	for _, q := range []history.Query{{TenantID: "acme", Status: history.Succeeded}, {TenantID: "globex"}, {TenantID: "acme", EventType: "invoice.paid"}} {
		if got := all(t, h, q); len(got) != 0 {
			t.Errorf("Search(%+v) after prune = %v, want none", q, got)
		}
	}
	if _, ok, err := h.Get("acme", "e3-A"); ok || err != nil {
		t.Errorf("Get(pruned) = %v, %v", ok, err)
	}
	// Outcomes of pruned deliveries are skipped; others still apply.
	f.succeed("e1-B", 1)
	f.succeed("e5-A", 1)
	f.sync(r)
	if _, ok, _ := h.Get("acme", "e1-B"); ok {
		t.Error("a pruned delivery came back")
	}
	if d, _, _ := h.Get("acme", "e5-A"); d.Status != history.Succeeded {
		t.Errorf("Get(e5-A) = %+v, want succeeded", d)
	}
}
