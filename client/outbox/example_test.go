package outbox_test

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/client/outbox"
)

// The business change and its event commit together, or not at all. (No
// output: it needs the producer's database.)
func ExampleInsert() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@localhost:5432/app")
	if err != nil {
		panic(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `UPDATE invoices SET paid_at = now() WHERE id = $1`, "inv_1001"); err != nil {
		panic(err)
	}
	if _, err := outbox.Insert(ctx, tx, outbox.DefaultTable, outbox.Event{
		ID: "inv_1001.paid", Type: "invoice.paid", ObjectID: "inv_1001", ObjectVersion: 2,
		Payload: []byte(`{"invoice":"inv_1001","amount":4200}`),
	}); err != nil {
		panic(err)
	}
	if err := tx.Commit(ctx); err != nil {
		panic(err)
	}
}
