package relay_test

import (
	"context"
	"os/signal"
	"syscall"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/outbox/relay"
)

// A relay in a producer's own process, until SIGTERM (`hookline relay`
// does the same from flags). No output: it needs the producer's database
// and a node.
func ExampleWorker_Run() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	pool, err := pgxpool.New(ctx, "postgres://relay@localhost:5432/app")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	hl, err := client.New(client.Config{Addr: "hookline.internal:7070", Token: "hk_…", CAFile: "/etc/hookline/ca.pem"})
	if err != nil {
		panic(err)
	}
	defer hl.Close()
	w, err := relay.New(relay.Config{DB: pool, Client: hl})
	if err != nil {
		panic(err)
	}
	if err := w.Run(ctx); err != nil {
		panic(err)
	}
}
