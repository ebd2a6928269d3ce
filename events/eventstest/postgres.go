package eventstest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresSchema returns the name of a new schema for one test on the
// PostgreSQL server at dsn: prefix and twelve random hex digits. The schema
// is dropped, with everything in it, when the test ends (after the cleanups
// registered later, such as closing a log on it).
func PostgresSchema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	schema := prefix + randomHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}
