package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Event is one business fact, written to the outbox in the transaction
// that commits it. The relay publishes it with these fields as they are
// (see client.Event, its counterpart on the wire).
type Event struct {
	// TenantID is the tenant to publish for: required when the relay uses
	// the admin token (a platform publishing for its customers), empty
	// when it uses a tenant's API key.
	TenantID string
	// ID names the fact, unique per tenant: 1 to 128 characters of
	// [A-Za-z0-9._:-]. Empty means a new UUIDv7, returned by Insert.
	ID string
	// Type is a dotted name such as invoice.paid. Required.
	Type          string
	SchemaVersion string
	ObjectID      string
	ObjectVersion int64
	// OccurredAt is when the fact happened; zero means the transaction's
	// time.
	OccurredAt time.Time
	// Payload are the exact bytes to deliver and sign. Required.
	Payload []byte
	// ContentType of Payload; empty means application/json.
	ContentType string
}

// ErrInvalid is the error of an Event that Hookline would refuse; nothing
// is written.
var ErrInvalid = errors.New("outbox: invalid event")

// PgxExecer is what Insert needs of the caller's transaction: pgx.Tx (and
// *pgx.Conn, *pgxpool.Pool, which insert outside any transaction of yours)
// have it, with T = pgconn.CommandTag. Generic, so that this package does
// not import pgx.
type PgxExecer[T any] interface {
	Exec(ctx context.Context, sql string, args ...any) (T, error)
}

// SQLExecer is what InsertSQL needs of the caller's transaction: *sql.Tx
// (and *sql.DB, *sql.Conn) have it.
type SQLExecer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Insert writes ev into table t inside tx, the transaction that commits
// the business change ev reports, and returns its event id. The event
// exists for the relay exactly when tx commits. A second event with the
// same tenant and id fails tx with the table's unique violation.
//
//	tx, _ := pool.Begin(ctx)
//	defer tx.Rollback(ctx)
//	_, _ = tx.Exec(ctx, `UPDATE invoices SET paid = true WHERE id = $1`, id)
//	_, _ = outbox.Insert(ctx, tx, outbox.DefaultTable, outbox.Event{Type: "invoice.paid", Payload: body})
//	_ = tx.Commit(ctx)
func Insert[T any](ctx context.Context, tx PgxExecer[T], t Table, ev Event) (string, error) {
	stmt, args, err := insertOf(t, &ev)
	if err != nil {
		return "", err
	}
	if _, err := tx.Exec(ctx, stmt, args...); err != nil {
		return "", fmt.Errorf("outbox: insert %s: %w", ev.ID, err)
	}
	return ev.ID, nil
}

// InsertSQL is Insert for a database/sql transaction (any PostgreSQL
// driver).
func InsertSQL(ctx context.Context, tx SQLExecer, t Table, ev Event) (string, error) {
	stmt, args, err := insertOf(t, &ev)
	if err != nil {
		return "", err
	}
	if _, err := tx.ExecContext(ctx, stmt, args...); err != nil {
		return "", fmt.Errorf("outbox: insert %s: %w", ev.ID, err)
	}
	return ev.ID, nil
}

// insertOf checks ev (giving it an id when it has none) and returns the
// statement and arguments that insert it.
func insertOf(t Table, ev *Event) (string, []any, error) {
	if err := t.Validate(); err != nil {
		return "", nil, err
	}
	if ev.ID == "" {
		id, err := uuid.NewV7()
		if err != nil {
			return "", nil, fmt.Errorf("outbox: new event id: %w", err)
		}
		ev.ID = id.String()
	}
	if err := ev.check(); err != nil {
		return "", nil, err
	}
	var occurred any // NULL: the column's default
	if !ev.OccurredAt.IsZero() {
		occurred = ev.OccurredAt
	}
	contentType := ev.ContentType
	if contentType == "" {
		contentType = "application/json"
	}
	stmt := `INSERT INTO ` + t.Ident() + ` (tenant_id, event_id, event_type, schema_version, object_id, object_version, occurred_at, content_type, payload)
		VALUES ($1, $2, $3, $4, $5, $6, COALESCE($7::timestamptz, now()), $8, $9)`
	return stmt, []any{ev.TenantID, ev.ID, ev.Type, ev.SchemaVersion, ev.ObjectID, ev.ObjectVersion, occurred, contentType, ev.Payload}, nil
}

// check refuses, before anything is written, what Hookline would refuse
// for sure: the relay would only park such a row as refused.
func (ev *Event) check() error {
	switch {
	case len(ev.ID) > 128:
		return fmt.Errorf("%w: id is %d characters long; use at most 128", ErrInvalid, len(ev.ID))
	case ev.Type == "":
		return fmt.Errorf("%w: type is required: a dotted name such as invoice.paid", ErrInvalid)
	case len(ev.Payload) == 0:
		return fmt.Errorf("%w: payload is empty", ErrInvalid)
	case ev.ObjectVersion < 0:
		return fmt.Errorf("%w: object version is negative", ErrInvalid)
	}
	for i := 0; i < len(ev.ID); i++ {
		c := ev.ID[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: id has %q at offset %d; use only letters, digits and . _ : -", ErrInvalid, c, i)
		}
	}
	return nil
}
