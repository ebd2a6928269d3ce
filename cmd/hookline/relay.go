package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/outbox"
	"github.com/hookline/hookline/client/outbox/relay"
)

// outboxFlags declares the flags that name the producer's outbox.
func outboxFlags(fs *flag.FlagSet) (db, table *string) {
	// The database's default is read when it is opened, so that -h never
	// shows its password.
	db = fs.String("db", "", "the producer's PostgreSQL database, postgres://user:pass@host:5432/db (default HOOKLINE_OUTBOX_DB)")
	table = fs.String("table", envOr("HOOKLINE_OUTBOX_TABLE", string(outbox.DefaultTable)), "the outbox table, name or schema.name (HOOKLINE_OUTBOX_TABLE)")
	return db, table
}

// openOutbox opens a pool of the producer's database with room for conns
// connections.
func openOutbox(ctx context.Context, dsn, table string, conns int32) (*pgxpool.Pool, error) {
	dsn = cmp.Or(dsn, os.Getenv("HOOKLINE_OUTBOX_DB"))
	if dsn == "" {
		return nil, errors.New("--db is missing; give the producer's database, where the outbox table is (or HOOKLINE_OUTBOX_DB)")
	}
	if err := outbox.Table(table).Validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("--db %s: %w", redactDSN(dsn), err)
	}
	cfg.MaxConns = max(cfg.MaxConns, conns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("--db %s: %w", redactDSN(dsn), err)
	}
	return pool, nil
}

// relayRun runs a relay Worker until ctx ends (SIGINT, SIGTERM).
func relayRun(ctx context.Context, args []string, _, stderr io.Writer) error {
	fs := newFlags("relay")
	db, table := outboxFlags(fs)
	opts := clientFlags(fs)
	batch := fs.Int("batch", 100, "rows per batch: one PublishBatch each")
	inFlight := fs.Int("in-flight", 2, "batches in flight at once")
	poll := fs.Duration("poll", 100*time.Millisecond, "how often an idle relay looks for new rows")
	retention := fs.Duration("retention", 7*24*time.Hour, "delete relayed rows this long after their creation; 0 never deletes")
	metricsAddr := fs.String("metrics-addr", os.Getenv("HOOKLINE_RELAY_METRICS_ADDR"), "serve Prometheus metrics at http://ADDR/metrics; empty serves none (HOOKLINE_RELAY_METRICS_ADDR)")
	logLevel := fs.String("log-level", envOr("HOOKLINE_LOG_LEVEL", "info"), "debug, info, warn or error (HOOKLINE_LOG_LEVEL)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, *logLevel)
	if err != nil {
		return err
	}
	if *retention == 0 {
		*retention = -1 // the Worker's "never"
	}

	pool, err := openOutbox(ctx, *db, *table, int32(*inFlight)+2)
	if err != nil {
		return err
	}
	defer pool.Close()
	ccfg := opts.config()
	if ccfg.Token == "" {
		return errNoToken
	}
	ccfg.Logger = logger
	hl, err := client.New(ccfg)
	if err != nil {
		return err
	}
	defer hl.Close()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	w, err := relay.New(relay.Config{
		DB: pool, Table: outbox.Table(*table), Client: hl,
		BatchSize: *batch, InFlight: *inFlight, PollEvery: *poll, PublishTimeout: opts.timeout, Retention: *retention,
		Registerer: reg, Logger: logger,
	})
	if err != nil {
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	if *metricsAddr != "" {
		lis, err := net.Listen("tcp", *metricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %s: %w", *metricsAddr, err)
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		g.Go(func() error { return serveHTTP(gctx, lis, mux) })
		logger.Info("relay metrics", slog.String("metrics_addr", lis.Addr().String()))
	}
	logger.Info("relay started", slog.String("table", *table), slog.String("hookline_addr", hl.Addr()),
		slog.Int("batch", *batch), slog.Int("in_flight", *inFlight))
	g.Go(func() error { return w.Run(gctx) })
	err = g.Wait()
	s := w.Stats()
	logger.Info("relay stopped", slog.Int64("published", s.Published), slog.Int64("duplicates", s.Duplicates),
		slog.Int64("refused", s.Refused), slog.Int64("failed_batches", s.Failures), slog.Int64("deleted", s.Deleted))
	return err
}

// outboxSchema prints the outbox table's SQL.
func outboxSchema(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("outbox schema")
	table := fs.String("table", envOr("HOOKLINE_OUTBOX_TABLE", string(outbox.DefaultTable)), "the outbox table, name or schema.name (HOOKLINE_OUTBOX_TABLE)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	t := outbox.Table(*table)
	if err := t.Validate(); err != nil {
		return err
	}
	_, err := fmt.Fprint(stdout, t.SQL())
	return err
}

// outboxInit creates the outbox table if it does not exist.
func outboxInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("outbox init")
	db, table := outboxFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pool, err := openOutbox(ctx, *db, *table, 1)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := outbox.Create(ctx, pool, outbox.Table(*table)); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "outbox table %s is ready\n", *table)
	return err
}

// outboxReconcile compares the outbox's committed rows of a time range
// with the events Hookline accepted, and repairs on request. It fails
// (exit status 1) when a row is missing in Hookline or differs.
func outboxReconcile(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("outbox reconcile")
	db, table := outboxFlags(fs)
	opts := clientFlags(fs)
	var since, until timeFlag
	fs.Var(&since, "since", "rows created at or after (RFC 3339, or a duration ago like 24h); required")
	fs.Var(&until, "until", "and before (default: now)")
	repair := fs.Bool("repair", false, "publish the rows Hookline does not have (idempotent)")
	list := fs.Int("list", 20, "list at most this many event ids of each kind")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if since.t == nil {
		return errors.New("outbox reconcile: --since is missing; give an RFC 3339 time or a duration ago like 24h")
	}
	pool, err := openOutbox(ctx, *db, *table, 2)
	if err != nil {
		return err
	}
	defer pool.Close()
	hl, err := opts.connect()
	if err != nil {
		return err
	}
	defer hl.Close()
	cfg := relay.ReconcileConfig{DB: pool, Table: outbox.Table(*table), Client: hl, Since: since.t.AsTime(), Repair: *repair, MaxListed: *list}
	if until.t != nil {
		cfg.Until = until.t.AsTime()
	}
	rep, err := relay.Reconcile(ctx, cfg)
	if err != nil {
		return noNode(err, opts.addr)
	}
	printOutboxReport(stdout, rep)
	if *repair {
		left := rep.Missing() - rep.Repaired + rep.Mismatched.Count
		if left > 0 {
			return fmt.Errorf("outbox reconcile: %d rows still missing in Hookline or different after the repair; look into the refusals listed above and run it again", left)
		}
		return nil
	}
	if n := rep.Missing() + rep.Mismatched.Count; n > 0 {
		return fmt.Errorf("outbox reconcile: %d rows missing in Hookline or different (%d waiting for the relay); --repair publishes the missing ones, --until 5m leaves the relay's lag out", n, rep.Waiting.Count)
	}
	return nil
}

func printOutboxReport(w io.Writer, r *relay.Report) {
	fmt.Fprintf(w, "outbox rows created %s .. %s: %d committed\n", r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.Rows)
	fmt.Fprintf(w, "  accepted    %d  (in Hookline, same payload)\n", r.Accepted)
	kinds := []struct {
		name, why string
		k         relay.Kind
	}{
		{name: "waiting", why: "not relayed yet", k: r.Waiting},
		{name: "lost", why: "marked relayed, unknown to Hookline", k: r.Lost},
		{name: "refused", why: "refused by Hookline, see the refusal column", k: r.Refused},
		{name: "mismatched", why: "accepted with another payload", k: r.Mismatched},
	}
	for _, k := range kinds {
		fmt.Fprintf(w, "  %-11s %d  (%s)", k.name, k.k.Count, k.why)
		if len(k.k.IDs) > 0 {
			more := ""
			if k.k.Count > len(k.k.IDs) {
				more = fmt.Sprintf(" and %d more", k.k.Count-len(k.k.IDs))
			}
			fmt.Fprintf(w, ": %s%s", strings.Join(k.k.IDs, " "), more)
		}
		fmt.Fprintln(w)
	}
	if r.Repaired > 0 {
		fmt.Fprintf(w, "  repaired    %d  (published now; %d of them Hookline had accepted meanwhile)\n", r.Repaired, r.RepairedDuplicates)
	}
}
