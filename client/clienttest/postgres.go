package clienttest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/client/outbox"
)

// Outbox is an outbox table for one test, in a schema of its own on the
// PostgreSQL server at HOOKLINE_POSTGRES_URL, dropped when the test ends.
type Outbox struct {
	// DSN is the server's URL.
	DSN string
	// Table is the outbox table, schema-qualified.
	Table outbox.Table
	// Pool is a pool of connections to the server, for the test's
	// producers and relays.
	Pool *pgxpool.Pool
}

// NewOutbox creates the schema and the table (unless bare), or skips the
// test, loudly, when HOOKLINE_POSTGRES_URL is not set. maxConns sizes Pool.
func NewOutbox(t testing.TB, maxConns int, bare ...bool) *Outbox {
	t.Helper()
	dsn := os.Getenv("HOOKLINE_POSTGRES_URL")
	if dsn == "" {
		t.Skip("HOOKLINE_POSTGRES_URL not set: skipping the outbox tests " +
			"(run eval \"$(.ci/postgres.sh)\" to start a server on loopback and set it)")
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	schema := "hltest_outbox_" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, withMaxConns(t, dsn, maxConns))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		pool.Close()
	})
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	o := &Outbox{DSN: dsn, Table: outbox.Table(schema + ".hookline_outbox"), Pool: pool}
	if len(bare) == 0 || !bare[0] {
		if err := outbox.Create(ctx, pool, o.Table); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// withMaxConns returns dsn with pgxpool's pool_max_conns set to n.
func withMaxConns(t testing.TB, dsn string, n int) string {
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
