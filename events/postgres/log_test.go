package postgres_test

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/eventstest"
	"github.com/hookline/hookline/events/postgres"
)

// serverURL returns HOOKLINE_POSTGRES_URL, or skips the test, saying how to
// set it.
func serverURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("HOOKLINE_POSTGRES_URL")
	if u == "" {
		t.Skip("HOOKLINE_POSTGRES_URL not set: skipping the PostgreSQL tests " +
			"(run eval \"$(.ci/postgres.sh)\" to start a server on loopback and set it)")
	}
	return u
}

// freshSchema returns the name of a new, empty schema for one test, dropped
// with everything in it when the test ends.
func freshSchema(t testing.TB, dsn string) string {
	t.Helper()
	return eventstest.PostgresSchema(t, dsn, "hltest_")
}

// withPool returns dsn with pgxpool's pool_max_conns set to n.
func withPool(t testing.TB, dsn string, n int) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		t.Fatalf("HOOKLINE_POSTGRES_URL must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(n))
	u.RawQuery = q.Encode()
	return u.String()
}

// open opens a log on cfg and closes it when the test ends.
func open(t testing.TB, cfg postgres.Config) *postgres.Log {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := postgres.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() }) // the suite's Closed case closes it first
	return l
}

// suiteMaxEventSize keeps the suite's largest events small enough for many
// parallel cases; the cap's logic is the same at any size.
const suiteMaxEventSize = 256 << 10

// TestConformance runs the events.Log suite against the server at
// HOOKLINE_POSTGRES_URL, in a schema of its own; each case opens its own
// Log on it, so the schema's migration also runs concurrently.
func TestConformance(t *testing.T) {
	dsn := serverURL(t)
	schema := freshSchema(t, dsn)
	dsn = withPool(t, dsn, 4)
	eventstest.Run(t, eventstest.Harness{
		New: func(t *testing.T) events.Log {
			return open(t, postgres.Config{DSN: dsn, Schema: schema, MaxEventSize: suiteMaxEventSize, PollEvery: 5 * time.Second})
		},
		MaxEventSize: suiteMaxEventSize,
		Owned:        true,
	})
}

// TestReopenWaitsForNoAppend: a node that opens a log whose schema is
// current (every node, at every restart) takes no lock on the events
// table, so it neither waits for the appends and reads in flight nor
// holds up those that follow. Before, its migration's ALTER TABLE ... IF
// NOT EXISTS took an ACCESS EXCLUSIVE lock even when it changed nothing.
func TestReopenWaitsForNoAppend(t *testing.T) {
	dsn := serverURL(t)
	schema := freshSchema(t, dsn)
	cfg := postgres.Config{DSN: dsn, Schema: schema}
	open(t, cfg) // creates the schema

	ctx := t.Context()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	// What an append in flight holds until it commits.
	if _, err := tx.Exec(ctx, "LOCK TABLE "+pgx.Identifier{schema}.Sanitize()+".events IN ROW EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	octx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	l, err := postgres.Open(octx, cfg)
	if err != nil {
		t.Fatalf("open beside an append in flight: %v (want no wait: the schema is current)", err)
	}
	_ = l.Close()
}
