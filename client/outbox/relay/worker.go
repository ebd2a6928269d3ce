package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/internal/pause"
)

// Worker moves committed outbox rows into Hookline until its context ends.
// Several Workers, in one process or many, may share one outbox table. It
// is safe for concurrent use; create it with New.
type Worker struct {
	cfg   Config
	table string // the table's quoted name
	m     *metrics
	stats struct {
		published, duplicates, refused, failures, deleted atomic.Int64
	}
}

// Stats are a Worker's counts since it was created.
type Stats struct {
	// Published rows became new events; Duplicates had been accepted
	// before (a relay died after publishing them); Refused were refused by
	// Hookline for good.
	Published, Duplicates, Refused int64
	// Failures are batches that failed and were left to retry.
	Failures int64
	// Deleted are relayed rows deleted after the retention.
	Deleted int64
}

// New returns a Worker; Run starts it.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	return &Worker{cfg: cfg, table: cfg.Table.Ident(), m: newMetrics(cfg.Registerer)}, nil
}

// Stats returns the Worker's counts so far.
func (w *Worker) Stats() Stats {
	return Stats{
		Published: w.stats.published.Load(), Duplicates: w.stats.duplicates.Load(), Refused: w.stats.refused.Load(),
		Failures: w.stats.failures.Load(), Deleted: w.stats.deleted.Load(),
	}
}

// Run relays until ctx ends, then returns nil once the batches in flight
// have ended. It fails at once if the outbox table cannot be read (it does
// not exist, no permission); any later failure (the database or Hookline
// unreachable, a batch refused as a whole) is logged, counted and retried
// after a backoff, with the rows left waiting in the outbox.
func (w *Worker) Run(ctx context.Context) error {
	if _, err := w.cfg.DB.Exec(ctx, `SELECT 1 FROM `+w.table+` LIMIT 0`); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: nothing was taken
		}
		return fmt.Errorf("relay: read %s: %w (create it with `hookline outbox init`)", w.cfg.Table, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	for range w.cfg.InFlight {
		g.Go(func() error { w.relayLoop(gctx); return nil })
	}
	g.Go(func() error { w.gaugeLoop(gctx); return nil })
	if w.cfg.Retention > 0 {
		g.Go(func() error { w.cleanupLoop(gctx); return nil })
	}
	return g.Wait()
}

// relayLoop relays batch after batch: at once while batches come back
// full, every PollEvery when the outbox is drained, after a growing
// backoff while batches fail.
func (w *Worker) relayLoop(ctx context.Context) {
	failures := 0
	for ctx.Err() == nil {
		n, err := w.Batch(ctx)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() == nil:
			failures++
			w.stats.failures.Add(1)
			w.m.failures.Inc()
			wait = w.backoff(failures)
			w.cfg.Logger.Warn("relay batch failed; its rows wait in the outbox", slog.String("error", err.Error()),
				slog.Int("failures", failures), slog.Duration("retry_in", wait))
		case n == w.cfg.BatchSize:
			failures = 0
			continue
		default:
			failures = 0
			wait = w.cfg.PollEvery
		}
		sleep(ctx, wait)
	}
}

// backoff is the wait after n batches failed in a row: a random duration
// up to PollEvery·2^n, at most BackoffCap.
func (w *Worker) backoff(n int) time.Duration {
	d := w.cfg.BackoffCap
	if n < 32 {
		d = min(d, w.cfg.PollEvery<<n)
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits d or until ctx ends. It paces polling and backoff; nothing
// waits on it to synchronise. Its loops test ctx themselves, so the error
// that ended a wait is not needed here.
func sleep(ctx context.Context, d time.Duration) {
	_ = pause.For(ctx, d)
}

// waiting are the rows a batch may take: neither relayed nor refused.
const waiting = `relayed_at IS NULL AND refused_at IS NULL`

// Batch relays one batch: in one transaction of the producer's database,
// it locks up to BatchSize waiting rows, oldest first, skipping rows that
// other batches hold; publishes them with one PublishBatch; marks the rows
// Hookline accepted as relayed and those it refused for good as refused;
// and commits. Rows that failed otherwise stay waiting. It returns the
// number of rows taken, and an error if the batch or part of it failed.
// Run calls it in a loop; tests call it to relay step by step.
func (w *Worker) Batch(ctx context.Context) (int, error) {
	tx, err := w.cfg.DB.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // a no-op after Commit
	// If this Worker hangs or loses its connection while holding rows,
	// the server ends the transaction and the rows are free again. The
	// marks need not wait for the WAL's flush: a mark lost in a crash of
	// the database leaves its row waiting, to be published again and
	// answered as a duplicate.
	idle := (w.cfg.PublishTimeout + 30*time.Second).Milliseconds()
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d; SET LOCAL synchronous_commit = off", idle)); err != nil {
		return 0, fmt.Errorf("set the batch's settings: %w", err)
	}
	began := time.Now()
	rows, err := w.take(ctx, tx)
	if err != nil || len(rows) == 0 {
		return 0, err
	}
	took := time.Now()
	evs := make([]client.Event, len(rows))
	for i := range rows {
		evs[i] = rows[i].ev
	}
	pctx, cancel := context.WithTimeout(ctx, w.cfg.PublishTimeout)
	results, pubErr := w.cfg.Client.PublishBatch(pctx, evs)
	cancel()
	published := time.Now()

	var relayed, refused []int64
	var dups []bool
	var why []string
	for i, r := range results {
		switch {
		case r.Err == nil:
			relayed = append(relayed, rows[i].seq)
			dups = append(dups, r.Response.GetDuplicate())
		case r.Err != pubErr && refusedForGood(r.Err):
			// This event's refusal, or its request's (its tenant with this
			// token): sending it again fails again. What stopped the whole
			// batch (r.Err == pubErr: Hookline down, the token refused) is
			// not the row's fault: it waits.
			refused = append(refused, rows[i].seq)
			why = append(why, r.Err.Error())
			w.cfg.Logger.Error("Hookline refused an outbox row; it waits for a person", slog.Int64("seq", rows[i].seq),
				slog.String("tenant_id", rows[i].ev.TenantID), slog.String("event_id", rows[i].ev.ID), slog.String("error", r.Err.Error()))
		}
	}
	// Record what Hookline answered even when ctx ended meanwhile: the
	// rows it accepted need not be published again.
	mctx, mcancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer mcancel()
	lags, err := w.mark(mctx, tx, relayed, dups, refused, why)
	if err != nil {
		return len(rows), err
	}
	if err := tx.Commit(mctx); err != nil {
		return len(rows), fmt.Errorf("commit: %w", err)
	}
	w.count(dups, len(refused), lags)
	w.cfg.Logger.Debug("relay batch", slog.Int("rows", len(rows)), slog.Int("relayed", len(relayed)), slog.Int("refused", len(refused)),
		slog.Duration("take", took.Sub(began)), slog.Duration("publish", published.Sub(took)), slog.Duration("mark", time.Since(published)))
	if pubErr != nil {
		return len(rows), fmt.Errorf("publish: %w", pubErr)
	}
	if n := len(rows) - len(relayed) - len(refused); n > 0 {
		return len(rows), fmt.Errorf("publish: %d of %d events failed and wait (first: %w)", n, len(rows), firstErr(results))
	}
	return len(rows), nil
}

// refusedForGood reports whether Hookline refused an event in a way that
// sending it again cannot change: an invalid field, the id accepted with
// another payload, a tenant this token may not publish for, too large. A
// refusal for the tenant's limit of calls in flight ([client.ErrLimited],
// which a busy portal or another relay can cause) is not: the row waits
// and the batch is tried again after the backoff.
func refusedForGood(err error) bool {
	if errors.Is(err, client.ErrLimited) {
		return false
	}
	return errors.Is(err, client.ErrInvalid) || errors.Is(err, client.ErrConflict) ||
		errors.Is(err, client.ErrPermissionDenied) || errors.Is(err, client.ErrTooLarge)
}

// taken is one locked row of a batch.
type taken struct {
	seq int64
	ev  client.Event
}

// take locks the batch's rows: FOR UPDATE SKIP LOCKED makes concurrent
// batches (of this Worker or others) take disjoint rows without waiting
// for each other.
func (w *Worker) take(ctx context.Context, tx pgx.Tx) ([]taken, error) {
	rows, err := tx.Query(ctx, `SELECT seq, tenant_id, event_id, event_type, schema_version, object_id, object_version, occurred_at, content_type, payload
		FROM `+w.table+` WHERE `+waiting+` ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`, w.cfg.BatchSize)
	if err != nil {
		return nil, fmt.Errorf("take rows: %w", err)
	}
	var out []taken
	for rows.Next() {
		var t taken
		e := &t.ev
		if err := rows.Scan(&t.seq, &e.TenantID, &e.ID, &e.Type, &e.SchemaVersion, &e.ObjectID, &e.ObjectVersion, &e.OccurredAt, &e.ContentType, &e.Payload); err != nil {
			rows.Close()
			return nil, fmt.Errorf("take rows: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("take rows: %w", err)
	}
	return out, nil
}

// mark records the batch's outcome in its transaction, and returns the
// relayed rows' lags in seconds.
func (w *Worker) mark(ctx context.Context, tx pgx.Tx, relayed []int64, dups []bool, refused []int64, why []string) ([]float64, error) {
	var lags []float64
	if len(relayed) > 0 {
		rows, err := tx.Query(ctx, `UPDATE `+w.table+` AS o SET relayed_at = clock_timestamp(), duplicate = d.dup
			FROM unnest($1::bigint[], $2::boolean[]) AS d(seq, dup) WHERE o.seq = d.seq
			RETURNING extract(epoch FROM o.relayed_at - o.created_at)::float8`, relayed, dups)
		if err != nil {
			return nil, fmt.Errorf("mark relayed: %w", err)
		}
		lags, err = pgx.CollectRows(rows, pgx.RowTo[float64])
		if err != nil {
			return nil, fmt.Errorf("mark relayed: %w", err)
		}
	}
	if len(refused) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE `+w.table+` AS o SET refused_at = clock_timestamp(), refusal = r.why
			FROM unnest($1::bigint[], $2::text[]) AS r(seq, why) WHERE o.seq = r.seq`, refused, why); err != nil {
			return nil, fmt.Errorf("mark refused: %w", err)
		}
	}
	return lags, nil
}

// count adds a committed batch to the stats and metrics.
func (w *Worker) count(dups []bool, refused int, lags []float64) {
	for _, d := range dups {
		if d {
			w.stats.duplicates.Add(1)
			w.m.duplicate.Inc()
		} else {
			w.stats.published.Add(1)
			w.m.published.Inc()
		}
	}
	w.stats.refused.Add(int64(refused))
	w.m.refusedRows.Add(float64(refused))
	for _, l := range lags {
		w.m.lag.Observe(l)
	}
}

func firstErr(results []client.Result) error {
	for _, r := range results {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// gaugeLoop refreshes the gauges every GaugeEvery.
func (w *Worker) gaugeLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := w.gauges(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("relay could not count the outbox's rows", slog.String("error", err.Error()))
		}
		sleep(ctx, w.cfg.GaugeEvery)
	}
}

// gauges reads the waiting and refused rows and the oldest waiting row's
// age, through the table's partial indexes.
func (w *Worker) gauges(ctx context.Context) error {
	var waitingRows, refusedRows int64
	var oldest float64
	err := w.cfg.DB.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM `+w.table+` WHERE `+waiting+`),
		(SELECT count(*) FROM `+w.table+` WHERE refused_at IS NOT NULL),
		COALESCE((SELECT extract(epoch FROM clock_timestamp() - created_at)::float8 FROM `+w.table+` WHERE `+waiting+` ORDER BY seq LIMIT 1), 0)`,
	).Scan(&waitingRows, &refusedRows, &oldest)
	if err != nil {
		return fmt.Errorf("count rows: %w", err)
	}
	w.m.waiting.Set(float64(waitingRows))
	w.m.refused.Set(float64(refusedRows))
	w.m.oldest.Set(oldest)
	return nil
}
