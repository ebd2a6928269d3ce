package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/hookline/hookline/client/clienttest"
	"github.com/hookline/hookline/client/outbox"
)

// row is an outbox row as the relay reads it.
type row struct {
	tenant, id, typ, schema, object, contentType string
	version                                      int64
	occurred                                     time.Time
	payload                                      []byte
}

func readRows(t *testing.T, o *clienttest.Outbox) map[string]row {
	t.Helper()
	rows, err := o.Pool.Query(context.Background(), `SELECT tenant_id, event_id, event_type, schema_version, object_id, content_type, object_version, occurred_at, payload FROM `+o.Table.Ident())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]row{}
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.tenant, &r.id, &r.typ, &r.schema, &r.object, &r.contentType, &r.version, &r.occurred, &r.payload); err != nil {
			t.Fatal(err)
		}
		out[r.id] = r
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInsert(t *testing.T) {
	o := clienttest.NewOutbox(t, 4)
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

	t.Run("commits with the transaction", func(t *testing.T) {
		tx, err := o.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		id, err := outbox.Insert(ctx, tx, o.Table, outbox.Event{
			TenantID: "acme", ID: "inv_1", Type: "invoice.paid", SchemaVersion: "2", ObjectID: "inv", ObjectVersion: 7,
			OccurredAt: at, Payload: []byte(`{"a":1}`), ContentType: "application/vnd.x+json",
		})
		if err != nil || id != "inv_1" {
			t.Fatalf("insert: %q %v", id, err)
		}
		if _, ok := readRows(t, o)["inv_1"]; ok {
			t.Fatal("the row is visible before the commit")
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got := readRows(t, o)["inv_1"]
		want := row{tenant: "acme", id: "inv_1", typ: "invoice.paid", schema: "2", object: "inv", contentType: "application/vnd.x+json", version: 7, occurred: at, payload: []byte(`{"a":1}`)}
		if got.tenant != want.tenant || got.typ != want.typ || got.schema != want.schema || got.object != want.object ||
			got.contentType != want.contentType || got.version != want.version || !got.occurred.Equal(at) || string(got.payload) != string(want.payload) {
			t.Fatalf("row %+v, want %+v", got, want)
		}
	})
	t.Run("rolls back with the transaction", func(t *testing.T) {
		tx, err := o.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := outbox.Insert(ctx, tx, o.Table, outbox.Event{ID: "inv_rolled_back", Type: "invoice.paid", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		if _, ok := readRows(t, o)["inv_rolled_back"]; ok {
			t.Fatal("a rolled back row exists")
		}
	})
	t.Run("defaults", func(t *testing.T) {
		tx, err := o.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		id, err := outbox.Insert(ctx, tx, o.Table, outbox.Event{Type: "order.paid", Payload: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Fatalf("generated id %q is not a UUIDv7", id)
		}
		var txTime time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&txTime); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		got := readRows(t, o)[id]
		if got.tenant != "" || got.contentType != "application/json" || !got.occurred.Equal(txTime) {
			t.Fatalf("row %+v: want no tenant, application/json, occurred at the transaction's time %v", got, txTime)
		}
	})
	t.Run("an id twice fails the transaction", func(t *testing.T) {
		_, err := outbox.Insert(ctx, o.Pool, o.Table, outbox.Event{TenantID: "acme", ID: "inv_1", Type: "invoice.paid", Payload: []byte(`{}`)})
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
			t.Fatalf("second inv_1: %v, want a unique violation", err)
		}
		// Another tenant may use the same id.
		if _, err := outbox.Insert(ctx, o.Pool, o.Table, outbox.Event{TenantID: "globex", ID: "inv_1", Type: "invoice.paid", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("what Hookline would refuse is not written", func(t *testing.T) {
		for _, ev := range []outbox.Event{
			{ID: "bad id", Type: "a.b", Payload: []byte(`{}`)},
			{ID: strings.Repeat("x", 129), Type: "a.b", Payload: []byte(`{}`)},
			{ID: "no_type", Payload: []byte(`{}`)},
			{ID: "no_payload", Type: "a.b"},
			{ID: "neg", Type: "a.b", Payload: []byte(`{}`), ObjectVersion: -1},
		} {
			if _, err := outbox.Insert(ctx, o.Pool, o.Table, ev); !errors.Is(err, outbox.ErrInvalid) {
				t.Errorf("%+v: %v, want ErrInvalid", ev, err)
			}
		}
		// The table checks event ids too, for rows written by hand.
		_, err := o.Pool.Exec(ctx, `INSERT INTO `+o.Table.Ident()+` (event_id, event_type, payload) VALUES ('bad id', 'a.b', '\x00')`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "23514" {
			t.Fatalf("hand-written bad id: %v, want a check violation", err)
		}
	})
}

func TestInsertSQL(t *testing.T) {
	o := clienttest.NewOutbox(t, 4)
	ctx := context.Background()
	db := stdlib.OpenDBFromPool(o.Pool)
	defer db.Close()
	tx, err := db.BeginTx(ctx, &sql.TxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := outbox.InsertSQL(ctx, tx, o.Table, outbox.Event{ID: "sql_1", Type: "invoice.paid", Payload: []byte(`{"b":2}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.InsertSQL(ctx, tx, o.Table, outbox.Event{ID: "sql_2", Type: "invoice.paid", Payload: []byte(`{}`), OccurredAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := readRows(t, o)
	if string(got["sql_1"].payload) != `{"b":2}` || got["sql_2"].id != "sql_2" {
		t.Fatalf("rows %+v", got)
	}
}

func TestTable(t *testing.T) {
	for _, name := range []outbox.Table{"", "outbox", "billing.outbox", "Out_Box_2"} {
		if err := name.Validate(); err != nil {
			t.Errorf("%q: %v", name, err)
		}
	}
	for _, name := range []outbox.Table{"a.b.c", "1outbox", "out-box", `x"; DROP TABLE users; --`, "a.", outbox.Table(strings.Repeat("t", 56))} {
		if err := name.Validate(); !errors.Is(err, outbox.ErrTableName) {
			t.Errorf("%q: %v, want ErrTableName", name, err)
		}
		if _, err := outbox.Insert(context.Background(), nopExec{}, name, outbox.Event{Type: "a.b", Payload: []byte(`{}`)}); !errors.Is(err, outbox.ErrTableName) {
			t.Errorf("insert into %q: %v, want ErrTableName", name, err)
		}
	}
	if got := outbox.Table("").Ident(); got != `"hookline_outbox"` {
		t.Errorf("default table %s", got)
	}
	if got := outbox.Table("billing.Outbox").Ident(); got != `"billing"."Outbox"` {
		t.Errorf("quoted %s", got)
	}

	t.Run("create is idempotent", func(t *testing.T) {
		o := clienttest.NewOutbox(t, 2, true)
		ctx := context.Background()
		for range 2 {
			if err := outbox.Create(ctx, o.Pool, o.Table); err != nil {
				t.Fatal(err)
			}
		}
		db := stdlib.OpenDBFromPool(o.Pool)
		defer db.Close()
		if err := outbox.CreateSQL(ctx, db, o.Table); err != nil {
			t.Fatal(err)
		}
		var indexes int
		schema, name, _ := strings.Cut(string(o.Table), ".")
		if err := o.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE schemaname = $1 AND tablename = $2`, schema, name).Scan(&indexes); err != nil {
			t.Fatal(err)
		}
		if indexes != 5 { // primary key, unique (tenant_id, event_id), waiting, created, refused
			t.Fatalf("%d indexes, want 5", indexes)
		}
	})
}

// nopExec is a transaction that must not be used.
type nopExec struct{}

func (nopExec) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("nopExec: called")
}

var _ outbox.PgxExecer[pgconn.CommandTag] = pgx.Tx(nil)
