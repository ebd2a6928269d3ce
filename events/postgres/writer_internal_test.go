package postgres

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/events"
)

// openFresh opens a log on a new schema of the server at
// HOOKLINE_POSTGRES_URL (or skips the test), and a connection of the test's
// own; both are closed, and the schema dropped, when the test ends.
func openFresh(t *testing.T) (*Log, *pgx.Conn) {
	t.Helper()
	dsn := os.Getenv("HOOKLINE_POSTGRES_URL")
	if dsn == "" {
		t.Skip("HOOKLINE_POSTGRES_URL not set: skipping the PostgreSQL tests (run eval \"$(.ci/postgres.sh)\" to set it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	schema := "hltest_" + hex.EncodeToString(b)
	l, err := Open(ctx, Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		_ = l.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Close()
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})
	return l, conn
}

// longStream is a stream name too long for the index on (stream,
// revision): the server raises an error when its events are inserted.
func longStream() string {
	b := make([]byte, 6000)
	_, _ = rand.Read(b)
	return "delivery-" + base64.StdEncoding.EncodeToString(b)
}

// TestGroupOutcomes builds groups by hand and commits each as the writer
// does: every append gets the outcome it would get alone, after the
// group's earlier appends, and a failing one does not touch the others.
func TestGroupOutcomes(t *testing.T) {
	l, _ := openFresh(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ev := func(typ string) events.Event { return events.Event{ID: uuid.New(), Type: typ, Data: []byte(typ)} }
	req := func(stream string, expected events.ExpectedRevision, evs ...events.Event) *appendReq {
		t.Helper()
		r, err := l.newAppendReq(stream, expected, evs)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	a1, a2 := ev("A1"), ev("A2")
	group := []*appendReq{
		req("delivery-a", events.NoStream{}, a1, a2),        // lands at 1, 2
		req("delivery-b", events.Exact(3), ev("B wrong")),   // no stream
		req("delivery-a", events.Exact(1), ev("A3")),        // sees a's first append: lands at 3
		req("delivery-a", events.NoStream{}, a1, a2),        // a retry of the first: its answer
		req("delivery-a", events.Exact(1), ev("late")),      // a is at revision 2 now
		req("endpoint-c", events.StreamExists{}, ev("C")),   // no such stream
		req("endpoint-c", events.Any{}, ev("C1")),           // lands at 4
		req("delivery-b", events.NoStream{}, ev("B")),       // lands at 5
		req("endpoint-c", events.NoStream{}, ev("C again")), // c exists now
	}
	l.commitGroup(ctx, group)

	want := []struct {
		res   events.AppendResult
		wrong bool
	}{
		{res: events.AppendResult{Revision: 1, Position: position(2)}},
		{wrong: true},
		{res: events.AppendResult{Revision: 2, Position: position(3)}},
		{res: events.AppendResult{Revision: 1, Position: position(2)}},
		{wrong: true},
		{wrong: true},
		{res: events.AppendResult{Revision: 0, Position: position(4)}},
		{res: events.AppendResult{Revision: 0, Position: position(5)}},
		{wrong: true},
	}
	for i, w := range want {
		r := group[i]
		switch {
		case w.wrong && !errors.Is(r.err, events.ErrWrongRevision):
			t.Errorf("append %d (%s, %s): %+v, %v; want a wrong revision", i, r.stream, r.expected, r.res, r.err)
		case !w.wrong && (r.err != nil || r.res != w.res):
			t.Errorf("append %d (%s, %s): %+v, %v; want %+v", i, r.stream, r.expected, r.res, r.err, w.res)
		}
	}
	if ws := l.WriterStats(); ws != (WriterStats{Groups: 1, Appends: 5}) {
		t.Errorf("writer stats %+v, want one group of 5 acknowledged appends", ws)
	}
	recs, err := l.ReadAll(ctx, events.Start, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantTypes := []string{"A1", "A2", "A3", "C1", "B"}
	if len(recs) != len(wantTypes) {
		t.Fatalf("log holds %d events, want %d", len(recs), len(wantTypes))
	}
	for i, r := range recs {
		if r.Type != wantTypes[i] || r.Position != position(int64(i+1)) {
			t.Errorf("event %d: %s at %s, want %s at %d", i, r.Type, r.Position, wantTypes[i], i+1)
		}
	}
	if head, err := l.Head(ctx); err != nil || head != position(5) {
		t.Errorf("head %s, %v; want 5", head, err)
	}

	// A group that the server refuses (one stream name too long to index)
	// runs again one append at a time: the bad append fails alone.
	bad := []*appendReq{
		req("delivery-d", events.NoStream{}, ev("D")),
		req(longStream(), events.NoStream{}, ev("Long")),
		req("delivery-a", events.Exact(2), ev("A4")),
	}
	l.commitGroup(ctx, bad)
	if r := bad[0]; r.err != nil || r.res != (events.AppendResult{Revision: 0, Position: position(6)}) {
		t.Errorf("append beside a refused one: %+v, %v; want revision 0 at 6", r.res, r.err)
	}
	if r := bad[1]; !errors.Is(r.err, events.ErrInvalid) {
		t.Errorf("append to a stream name too long to index: %v, want ErrInvalid", r.err)
	}
	if r := bad[2]; r.err != nil || r.res != (events.AppendResult{Revision: 3, Position: position(7)}) {
		t.Errorf("append after a refused one: %+v, %v; want revision 3 at 7", r.res, r.err)
	}
	if ws := l.WriterStats(); ws.Fallbacks != 1 {
		t.Errorf("writer stats %+v, want 1 fallback", ws)
	}
}

// TestAppendContext: an append whose ctx ends while it waits for the
// writer is dropped, unwritten; one that the writer has taken reports its
// real outcome, whatever its ctx does meanwhile. The writer is held inside
// a group by the head lock, taken by the test's own transaction.
func TestAppendContext(t *testing.T) {
	l, conn := openFresh(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Release the writer before the cleanup closes the log, whatever
	// happens; after the commit below, Rollback does nothing.
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, l.headLock); err != nil {
		t.Fatal(err)
	}

	type result struct {
		res events.AppendResult
		err error
	}
	takenCtx, cancelTaken := context.WithCancel(ctx)
	taken := make(chan result, 1)
	go func() {
		res, err := l.Append(takenCtx, "delivery-taken", events.NoStream{}, events.Event{ID: uuid.New(), Type: "Taken"})
		taken <- result{res, err}
	}()
	waitForLockWait(t, ctx, l)

	queuedCtx, cancelQueued := context.WithCancel(ctx)
	queued := make(chan result, 1)
	go func() {
		res, err := l.Append(queuedCtx, "delivery-queued", events.NoStream{}, events.Event{ID: uuid.New(), Type: "Queued"})
		queued <- result{res, err}
	}()
	cancelQueued()
	if r := <-queued; !errors.Is(r.err, context.Canceled) {
		t.Errorf("append cancelled while queued: %+v, %v; want context.Canceled", r.res, r.err)
	}
	cancelTaken()
	select {
	case r := <-taken:
		t.Fatalf("append taken by the writer returned while its group waited: %+v, %v", r.res, r.err)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-taken; r.err != nil || r.res.Position != position(1) {
		t.Errorf("append taken by the writer, then cancelled: %+v, %v; want it written at 1", r.res, r.err)
	}
	recs, err := l.ReadAll(ctx, events.Start, 10)
	if err != nil || len(recs) != 1 || recs[0].Type != "Taken" {
		t.Errorf("log holds %d events (%v), want only the taken append's", len(recs), err)
	}
}

// waitForLockWait polls, under ctx, until the log's writer is seen waiting
// for a lock inside append_group.
func waitForLockWait(t *testing.T, ctx context.Context, l *Log) {
	t.Helper()
	for {
		var n int
		err := l.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%.append_group(%'`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the writer was never seen waiting for the head lock")
		case <-time.After(10 * time.Millisecond): // poll interval
		}
	}
}
