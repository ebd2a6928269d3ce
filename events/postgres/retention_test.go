package postgres_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/events/postgres"
)

// clock is an injected clock that the test moves.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestRetention: once their partitions are older than the retention, event
// and delivery streams are gone (ReadStream says ErrStreamNotFound, the
// whole log skips them), tenant and endpoint streams are kept, and reading
// or subscribing across the gap works.
func TestRetention(t *testing.T) {
	dsn := serverURL(t)
	clk := &clock{now: time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)}
	l := open(t, postgres.Config{DSN: dsn, Schema: freshSchema(t, dsn), Now: clk.Now,
		Retention: 30 * 24 * time.Hour, PartitionEvery: 24 * time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	ev := func(typ string) events.Event { return events.Event{ID: uuid.New(), Type: typ, Data: []byte(typ)} }
	mustAppend := func(stream string, evs ...events.Event) events.AppendResult {
		t.Helper()
		res, err := l.Append(ctx, stream, events.Any{}, evs...)
		if err != nil {
			t.Fatalf("append %s: %v", stream, err)
		}
		return res
	}
	oldDelivery := events.DeliveryStream("dlv_old")
	oldEvent := events.EventStream("t1", "ev_old")
	tenant := events.TenantStream("t1")
	endpoint := events.EndpointStream("ep1")
	mustAppend(tenant, ev("TenantCreated"))
	first := mustAppend(oldEvent, ev("EventPublished"), ev("DeliveriesPlanned"))
	mustAppend(oldDelivery, ev("AttemptFailed"))
	clk.Add(20 * time.Hour) // the next day's partition, created ahead by Open
	mustAppend(oldDelivery, ev("AttemptSucceeded"))
	mustAppend(endpoint, ev("EndpointCreated"))

	// A subscriber from before the drop, parked in the dropped range.
	sub := make(chan events.Record, 100)
	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() {
		subDone <- l.Subscribe(subCtx, first.Position, events.Filter{StreamPrefixes: []string{"endpoint-"}}, func(recs []events.Record, _ events.Position) error {
			for _, r := range recs {
				sub <- r
			}
			return nil
		})
	}()
	if r := <-sub; r.Stream != endpoint {
		t.Fatalf("subscriber saw %s, want %s", r.Stream, endpoint)
	}

	clk.Add(40 * 24 * time.Hour)
	stats, err := l.Maintain(ctx)
	if err != nil {
		t.Fatalf("maintain: %v", err)
	}
	// Open created 3 partitions (Jan 10, 11, 12); 40 days later Maintain
	// creates Feb 20, 21, 22 and drops the three of January, all older than
	// 30 days.
	if stats.Created != 3 || stats.Dropped != 3 {
		t.Errorf("maintain: %+v, want 3 created, 3 dropped", stats)
	}
	if again, err := l.Maintain(ctx); err != nil || again != (postgres.MaintainStats{}) {
		t.Errorf("second maintain: %+v, %v; want nothing to do", again, err)
	}

	for _, s := range []string{oldDelivery, oldEvent} {
		if recs, err := l.ReadStream(ctx, s, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
			t.Errorf("read %s after retention: %d records, err %v; want ErrStreamNotFound", s, len(recs), err)
		}
	}
	for _, s := range []string{tenant, endpoint} {
		if recs, err := l.ReadStream(ctx, s, events.Forwards, 0, 10); err != nil || len(recs) != 1 {
			t.Errorf("read kept stream %s: %d records, err %v; want 1", s, len(recs), err)
		}
	}

	// New appends after the gap: a new partition for a new stream, and the
	// old delivery stream's name starts again at revision 0.
	again := mustAppend(oldDelivery, ev("ReplayRequested"))
	if again.Revision != 0 {
		t.Errorf("append to a dropped stream: revision %d, want 0 (a new stream)", again.Revision)
	}
	later := mustAppend(endpoint, ev("EndpointPaused"))
	if r := <-sub; r.Position != later.Position {
		t.Errorf("subscriber across the drop saw %s@%d at %s, want the append at %s", r.Stream, r.Revision, r.Position, later.Position)
	}
	stopSub()
	if err := <-subDone; !errors.Is(err, context.Canceled) {
		t.Errorf("subscription ended with %v", err)
	}

	all, err := l.ReadAll(ctx, events.Start, 100)
	if err != nil {
		t.Fatalf("read all: %v", err)
	}
	var streams []string
	for i, r := range all {
		if i > 0 && !all[i-1].Position.Less(r.Position) {
			t.Errorf("read all: %s after %s", r.Position, all[i-1].Position)
		}
		streams = append(streams, r.Stream)
	}
	want := []string{tenant, endpoint, oldDelivery, endpoint}
	if len(streams) != len(want) {
		t.Fatalf("whole log after retention: %v, want %v", streams, want)
	}
	for i := range want {
		if streams[i] != want[i] {
			t.Errorf("whole log after retention: %v, want %v", streams, want)
			break
		}
	}
	if head, err := l.Head(ctx); err != nil || head != later.Position {
		t.Errorf("head %s, %v; want %s", head, err, later.Position)
	}
}

// TestRunEndsWithContext: Run maintains at once, and returns nil when its
// context ends.
func TestRunEndsWithContext(t *testing.T) {
	dsn := serverURL(t)
	l := open(t, postgres.Config{DSN: dsn, Schema: freshSchema(t, dsn)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not end within 10s of its context")
	}
}

// TestRetentionArchives: with an archive, a time partition's streams are
// archived whole before the partition is dropped; they read back from the
// archive once the log no longer has them, and a stream of a partition
// kept is not archived.
func TestRetentionArchives(t *testing.T) {
	dsn := serverURL(t)
	clk := &clock{now: time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)}
	arc, err := archive.Open(t.Context(), "file://"+t.TempDir()+"?create_dir=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer arc.Close()
	l := open(t, postgres.Config{DSN: dsn, Schema: freshSchema(t, dsn), Now: clk.Now,
		Retention: 24 * time.Hour, PartitionEvery: 24 * time.Hour, Archive: arc})
	ctx := t.Context()
	old := events.EventStream("t1", "ev_old")
	for i := range 3 {
		if _, err := l.Append(ctx, old, events.Any{}, events.Event{ID: uuid.New(), Type: "T", Data: fmt.Appendf(nil, "old %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	want, err := l.ReadStream(ctx, old, events.Forwards, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(3 * 24 * time.Hour)
	if stats, err := l.Maintain(ctx); err != nil || stats.Dropped == 0 {
		t.Fatalf("maintain: %+v, %v; want the old partition dropped", stats, err)
	}
	fresh := events.DeliveryStream("dlv_fresh")
	if _, err := l.Append(ctx, fresh, events.Any{}, events.Event{ID: uuid.New(), Type: "T", Data: []byte("fresh")}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := l.ReadStream(ctx, old, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("the dropped stream in the log: %v", err)
	}
	got, err := arc.ReadStream(ctx, old)
	if err != nil || len(got) != len(want) {
		t.Fatalf("the archive: %d records, %v", len(got), err)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !bytes.Equal(got[i].Data, want[i].Data) || got[i].Position != want[i].Position {
			t.Fatalf("archived record %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if ok, err := arc.Has(ctx, fresh); err != nil || ok {
		t.Fatalf("a kept stream archived: %v, %v", ok, err)
	}
}
