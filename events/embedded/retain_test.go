package embedded_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/events/embedded"
)

// clock is an injected clock that tests move by hand.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func payloadEvent(typ string, size int) events.Event {
	data := make([]byte, size)
	_, _ = rand.Read(data) // incompressible, so sizes on disk mean something
	return events.Event{ID: uuid.New(), Type: typ, Data: data}
}

func TestRetain(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := open(t, embedded.Config{Dir: t.TempDir(), Now: clk.Now})
	appendOK := func(stream string, exp events.ExpectedRevision, evs ...events.Event) {
		t.Helper()
		if _, err := l.Append(ctx, stream, exp, evs...); err != nil {
			t.Fatalf("append %s: %v", stream, err)
		}
	}

	sacrificedAt := clk.Now()
	appendOK(events.DeliveryStream("sacrificed"), events.NoStream{}, payloadEvent("AttemptFailed", 10))
	clk.Advance(time.Hour)

	// Old streams: 200 deliveries and 50 events of 20 KiB each, 5 MiB.
	var old []string
	for range 50 {
		s := events.EventStream("t1", uuid.NewString())
		appendOK(s, events.NoStream{}, payloadEvent("EventPublished", 20<<10), payloadEvent("DeliveriesPlanned", 1<<10))
		old = append(old, s)
		for range 4 {
			d := events.DeliveryStream(uuid.NewString())
			appendOK(d, events.NoStream{}, payloadEvent("AttemptFailed", 20<<10))
			old = append(old, d)
		}
	}
	kept := []string{events.TenantStream("t1"), events.EndpointStream("ep1")}
	for _, s := range kept {
		appendOK(s, events.NoStream{}, payloadEvent("Created", 1<<10))
	}
	revived := events.DeliveryStream("revived")
	appendOK(revived, events.NoStream{}, payloadEvent("AttemptFailed", 1<<10))

	clk.Advance(31 * 24 * time.Hour)
	appendOK(revived, events.Exact(0), payloadEvent("AttemptSucceeded", 1<<10))
	fresh := events.DeliveryStream("fresh")
	appendOK(fresh, events.NoStream{}, payloadEvent("AttemptFailed", 1<<10))
	kept = append(kept, revived, fresh)

	// Retention compacts what it dropped, which first flushes the memtable
	// holding it: dropping the sacrificial stream, written first, puts all
	// the data above in tables, where it can be seen to go.
	if stats, err := l.Retain(ctx, sacrificedAt.Add(time.Second)); err != nil || stats.Streams != 1 {
		t.Fatalf("retain the sacrificial stream: %+v, %v", stats, err)
	}
	before, err := l.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	if before.Tables < 5<<20 {
		t.Fatalf("disk usage %+v before retention: want the 5 MiB in tables", before)
	}
	headBefore, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stats, err := l.Retain(ctx, clk.Now().Add(-embedded.DefaultRetention))
	if err != nil {
		t.Fatalf("retain: %v", err)
	}
	if stats.Streams != len(old) || stats.Events != 50*2+200 || stats.Bytes < 50*21<<10+200*20<<10 {
		t.Errorf("stats = %+v, want %d streams, 300 events, over 5 MB", stats, len(old))
	}
	for _, s := range old {
		if _, err := l.ReadStream(ctx, s, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
			t.Fatalf("read %s after retention: err = %v, want ErrStreamNotFound", s, err)
		}
	}
	for _, s := range kept {
		if _, err := l.ReadStream(ctx, s, events.Forwards, 0, 10); err != nil {
			t.Errorf("read kept stream %s: %v", s, err)
		}
	}
	all, err := l.ReadAll(ctx, events.Start, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 {
		t.Errorf("the log holds %d events after retention, want 5 (tenant, endpoint, revived×2, fresh)", len(all))
	}
	// A dropped stream starts over at revision 0: the writer forgot the
	// head it had cached when it appended there.
	if res, err := l.Append(ctx, old[0], events.NoStream{}, payloadEvent("EventPublished", 10)); err != nil || res.Revision != 0 {
		t.Errorf("append to %s after retention dropped it: revision %d, %v; want revision 0", old[0], res.Revision, err)
	}
	// Sequence numbers go on from where they were, past the gaps.
	res, err := l.Append(ctx, events.TenantStream("t1"), events.Exact(0), payloadEvent("TenantQuotaChanged", 10))
	if err != nil || !headBefore.Less(res.Position) {
		t.Errorf("append after retention at %v (err %v), want after %s", res.Position, err, headBefore)
	}

	// The old data is gone from the tables; what is left is the kept
	// streams, and the WAL files Pebble keeps to recycle.
	after, err := l.DiskUsage()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("disk usage before retention %+v, after %+v", before, after)
	if after.Tables > 64<<10 {
		t.Errorf("tables hold %d bytes after retention, want under 64 KiB", after.Tables)
	}

	// A second pass finds nothing more to drop.
	if stats, err := l.Retain(ctx, clk.Now().Add(-embedded.DefaultRetention)); err != nil || stats.Streams != 0 {
		t.Errorf("second retain: %+v, %v; want nothing dropped", stats, err)
	}
}

// TestRunAppliesRetention: the background loop drops old streams on its own
// ticks and stops with its context.
func TestRunAppliesRetention(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	l := open(t, embedded.Config{Dir: "db", FS: vfs.NewMem(), Now: clk.Now, Retention: time.Hour, RetainEvery: 5 * time.Millisecond})
	old := events.DeliveryStream("old")
	if _, err := l.Append(ctx, old, events.NoStream{}, payloadEvent("AttemptFailed", 100)); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, events.EndpointStream("ep"), events.NoStream{}, payloadEvent("EndpointCreated", 100)); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- l.Run(runCtx) }()

	clk.Advance(2 * time.Hour)
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := l.ReadStream(ctx, old, events.Forwards, 0, 1)
		if errors.Is(err, events.ErrStreamNotFound) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			t.Fatalf("old stream still readable (err %v) after Run's cut-off passed it", err)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if _, err := l.ReadStream(ctx, events.EndpointStream("ep"), events.Forwards, 0, 1); err != nil {
		t.Errorf("endpoint stream: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run after cancel: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
}

// TestRetainArchives: with an archive, retention hands every record of
// the streams it drops to it first; they read back from the archive, whole
// and unchanged, once the log no longer has them. Streams it keeps are not
// archived.
func TestRetainArchives(t *testing.T) {
	ctx := t.Context()
	clk := newClock()
	arc, err := archive.Open(ctx, "file://"+t.TempDir()+"?create_dir=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer arc.Close()
	l := open(t, embedded.Config{Dir: t.TempDir(), Now: clk.Now, Archive: arc})
	old := events.EventStream("t1", "e1")
	if _, err := l.Append(ctx, old, events.NoStream{}, payloadEvent("EventPublished", 100), payloadEvent("DeliveriesPlanned", 10)); err != nil {
		t.Fatal(err)
	}
	want, err := l.ReadStream(ctx, old, events.Forwards, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Hour)
	fresh := events.DeliveryStream("fresh")
	if _, err := l.Append(ctx, fresh, events.NoStream{}, payloadEvent("AttemptFailed", 10)); err != nil {
		t.Fatal(err)
	}
	stats, err := l.Retain(ctx, clk.Now().Add(-time.Minute))
	if err != nil || stats.Streams != 1 || stats.Archived != 2 {
		t.Fatalf("retain: %+v, %v; want 1 stream dropped, its 2 records archived", stats, err)
	}
	if _, err := l.ReadStream(ctx, old, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("the dropped stream in the log: %v", err)
	}
	got, err := arc.ReadStream(ctx, old)
	if err != nil || len(got) != 2 {
		t.Fatalf("the archive: %d records, %v", len(got), err)
	}
	for i := range got {
		if got[i].ID != want[i].ID || !bytes.Equal(got[i].Data, want[i].Data) || got[i].Position != want[i].Position {
			t.Fatalf("archived record %d differs: %+v, want %+v", i, got[i], want[i])
		}
	}
	if ok, err := arc.Has(ctx, fresh); err != nil || ok {
		t.Fatalf("a kept stream archived: %v, %v", ok, err)
	}
}
