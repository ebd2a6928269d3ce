package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/events"
)

// TestSlowCommitterHoldsLaterPositions drives the case that breaks
// positions handed out at insert: transaction A takes a position and does
// not commit; B appends to another stream meanwhile. B must wait (it is
// seen waiting on a lock in pg_stat_activity), A's uncommitted event must
// be invisible to readers and not counted by Head, and once A commits, B
// lands after it, and a reader sees A then B.
func TestSlowCommitterHoldsLaterPositions(t *testing.T) {
	dsn := os.Getenv("HOOKLINE_POSTGRES_URL")
	if dsn == "" {
		t.Skip("HOOKLINE_POSTGRES_URL not set: skipping the PostgreSQL tests (run eval \"$(.ci/postgres.sh)\" to set it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	schema := "hltest_" + hex.EncodeToString(b)
	l, err := Open(ctx, Config{DSN: dsn, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = l.Close()
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	})

	// A: an append inside a transaction left open, through the append
	// function that older nodes call.
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var (
		status             int32
		revA, posA, actual *int64
	)
	idA := uuid.New()
	appendA := `SELECT o_status, o_revision, o_position, o_actual FROM ` + l.schema + `.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`
	err = tx.QueryRow(ctx, appendA, "delivery-a", true, int32(1), int64(0), time.Now(),
		[][16]byte{idA}, []string{"A"}, [][]byte{{}}, [][]byte{{}}, l.channel, l.headLock).Scan(&status, &revA, &posA, &actual)
	if err != nil || status != 0 {
		t.Fatalf("append A in a transaction: status %d, %v", status, err)
	}

	// B: through the log, in the background.
	type result struct {
		res events.AppendResult
		err error
	}
	doneB := make(chan result, 1)
	go func() {
		res, err := l.Append(ctx, "delivery-b", events.NoStream{}, events.Event{ID: uuid.New(), Type: "B"})
		doneB <- result{res, err}
	}()
	for waiting := 0; waiting == 0; {
		var n int
		if err := l.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%.append_group(%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		waiting = n
		select {
		case r := <-doneB:
			t.Fatalf("B completed (%+v, %v) while A held its position uncommitted", r.res, r.err)
		case <-ctx.Done():
			t.Fatal("B never seen waiting for A")
		case <-time.After(10 * time.Millisecond): // poll interval
		}
	}
	if head, err := l.Head(ctx); err != nil || !head.IsStart() {
		t.Errorf("head with only A uncommitted: %s, %v; want Start", head, err)
	}
	if recs, err := l.ReadAll(ctx, events.Start, 10); err != nil || len(recs) != 0 {
		t.Errorf("read all with only A uncommitted: %d records, %v; want none", len(recs), err)
	}

	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-doneB
	if r.err != nil {
		t.Fatalf("append B: %v", r.err)
	}
	if !position(*posA).Less(r.res.Position) {
		t.Errorf("B at %s, A at %d: B committed later, so it must come later", r.res.Position, *posA)
	}
	recs, err := l.ReadAll(ctx, events.Start, 10)
	if err != nil || len(recs) != 2 || recs[0].ID != idA || recs[1].Type != "B" {
		t.Errorf("read all: %d records (%v), want A then B", len(recs), err)
	}
}
