package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/events"
)

// partitionsAhead is how many periods after the current one Open and Run
// create partitions for, so appends never wait for one.
const partitionsAhead = 2

// ddlLockTimeout bounds how long maintenance waits for a table lock: a
// DDL statement waiting for its lock queues every append behind it, so it
// gives up quickly and tries again at the next pass.
const ddlLockTimeout = "2s"

// MaintainStats tells what one maintenance pass did.
type MaintainStats struct {
	// Created is the number of time partitions created.
	Created int
	// Dropped is the number of time partitions dropped, with every event
	// and delivery stream born in them.
	Dropped int
}

// Maintain creates the time partitions for now and the next periods, and
// drops those whose whole period is older than Config.Retention, with their
// streams. Tenant and endpoint streams are never dropped. Safe for
// concurrent use, also by several nodes: passes take turns on the schema's
// advisory lock.
func (l *Log) Maintain(ctx context.Context) (MaintainStats, error) {
	if l.closed.Load() {
		return MaintainStats{}, fmt.Errorf("maintain: %w", events.ErrClosed)
	}
	now := l.cfg.Now()
	created, err := l.createAhead(ctx, now)
	stats := MaintainStats{Created: created}
	if err != nil {
		return stats, fmt.Errorf("maintain: %w", l.translate(err))
	}
	stats.Dropped, err = l.dropBefore(ctx, now.Add(-l.cfg.Retention))
	if err != nil {
		return stats, fmt.Errorf("maintain: %w", l.translate(err))
	}
	return stats, nil
}

// Run maintains the partitions now and then every Config.MaintainEvery,
// until ctx ends (it then returns nil) or the log closes
// ([events.ErrClosed]). A failed pass is logged and retried at the next
// tick.
func (l *Log) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.MaintainEvery)
	defer t.Stop()
	for {
		stats, err := l.Maintain(ctx)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, events.ErrClosed):
			return err
		case err != nil:
			l.log.Error("partition maintenance failed", slog.Any("error", err))
		case stats.Created > 0 || stats.Dropped > 0:
			l.log.Info("partitions maintained", slog.Int("created", stats.Created), slog.Int("dropped", stats.Dropped))
		}
		select {
		case <-t.C:
		case <-ctx.Done():
			return nil
		case <-l.quit:
			return events.ErrClosed
		}
	}
}

// createAhead makes sure that partitions cover now and the next
// partitionsAhead periods.
func (l *Log) createAhead(ctx context.Context, now time.Time) (int, error) {
	n := 0
	for i := range partitionsAhead + 1 {
		ok, err := l.createPartition(ctx, now.Add(time.Duration(i)*l.cfg.PartitionEvery))
		if err != nil {
			return n, err
		}
		if ok {
			n++
		}
	}
	return n, nil
}

// createPartition makes sure a partition of expiring events covers t: the
// period [lo, lo+PartitionEvery) that holds t, lo a multiple of
// PartitionEvery since Go's zero time (daily partitions start at midnight
// UTC), clipped to the partitions that exist
// (PartitionEvery may have changed). It reports whether it created one.
func (l *Log) createPartition(ctx context.Context, t time.Time) (bool, error) {
	t = t.UTC()
	lo := t.Truncate(l.cfg.PartitionEvery)
	hi := lo.Add(l.cfg.PartitionEvery)
	created := false
	err := l.maintenanceTx(ctx, func(tx pgx.Tx) error {
		var (
			covered       bool
			before, after time.Time // the end of the partition before t, the start of the one after
		)
		err := tx.QueryRow(ctx, `SELECT
				EXISTS (SELECT 1 FROM `+l.schema+`.partitions WHERE lo <= $1 AND $1 < hi),
				coalesce((SELECT max(hi) FROM `+l.schema+`.partitions WHERE hi <= $1), $2),
				coalesce((SELECT min(lo) FROM `+l.schema+`.partitions WHERE lo > $1), $3)`,
			t, lo, hi).Scan(&covered, &before, &after)
		if err != nil || covered {
			return err
		}
		if before.After(lo) {
			lo = before.UTC()
		}
		if after.Before(hi) {
			hi = after.UTC()
		}
		name := "events_exp_" + lo.Format("20060102t150405")
		ddl := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s.%s PARTITION OF %s.events_expiring FOR VALUES FROM (%s) TO (%s)`,
			l.schema, pgx.Identifier{name}.Sanitize(), l.schema, literal(lo), literal(hi))
		if _, err := tx.Exec(ctx, ddl); err != nil {
			return fmt.Errorf("create partition %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+l.schema+`.partitions (name, lo, hi) VALUES ($1, $2, $3)`, name, lo, hi); err != nil {
			return fmt.Errorf("record partition %s: %w", name, err)
		}
		created = true
		l.log.Debug("partition created", slog.String("partition", name), slog.Time("from", lo), slog.Time("to", hi))
		return nil
	})
	return created, err
}

// dropBefore drops the partitions whose period ends at or before cutoff,
// each archived first when Config.Archive is set. It locks the events
// table first, as appends and reads do (parent before partitions), so that
// it cannot deadlock with them.
func (l *Log) dropBefore(ctx context.Context, cutoff time.Time) (int, error) {
	rows, err := l.pool.Query(ctx, `SELECT name FROM `+l.schema+`.partitions WHERE hi <= $1 ORDER BY lo`, cutoff)
	if err != nil {
		return 0, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, name := range names {
		archived := int64(-1) // not counted: no archive
		if l.cfg.Archive != nil {
			if archived, err = l.archivePartition(ctx, name); err != nil {
				return dropped, fmt.Errorf("archive partition %s: %w", name, err)
			}
		}
		ok, err := l.dropPartition(ctx, name, archived, cutoff)
		if err != nil {
			return dropped, err
		}
		if ok {
			dropped++
		}
	}
	return dropped, nil
}

// dropPartition drops one partition; when archived is not negative, only
// if it still holds that many events (else an append reached it after it
// was archived: the next pass archives it again).
func (l *Log) dropPartition(ctx context.Context, name string, archived int64, cutoff time.Time) (bool, error) {
	table := l.schema + `.` + pgx.Identifier{name}.Sanitize()
	dropped := false
	err := l.maintenanceTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE `+l.schema+`.events IN ACCESS EXCLUSIVE MODE`); err != nil {
			return fmt.Errorf("lock events: %w", err)
		}
		if archived >= 0 {
			var n int64
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
				return fmt.Errorf("count partition %s: %w", name, err)
			}
			if n != archived {
				l.log.Warn("partition written to while archived; archiving it again next pass", slog.String("partition", name),
					slog.Int64("archived", archived), slog.Int64("events", n))
				return nil
			}
		}
		if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+table); err != nil {
			return fmt.Errorf("drop partition %s: %w", name, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM `+l.schema+`.partitions WHERE name = $1`, name); err != nil {
			return fmt.Errorf("forget partition %s: %w", name, err)
		}
		dropped = true
		l.log.Info("partition dropped", slog.String("partition", name), slog.Time("cutoff", cutoff), slog.Int64("archived", archived))
		return nil
	})
	return dropped, err
}

// archiveSegment is how many events one archive segment of a partition
// holds at least (whole streams: the last one may take it past).
const archiveSegment = 4096

// archivePartition hands a partition's events to Config.Archive, whole
// streams per segment, and returns how many it handed.
func (l *Log) archivePartition(ctx context.Context, name string) (int64, error) {
	query := `SELECT ` + columns + ` FROM ` + l.schema + `.` + pgx.Identifier{name}.Sanitize() + ` e
		WHERE (e.stream, e.revision) > ($1, $2) ORDER BY e.stream, e.revision LIMIT $3`
	var (
		total   int64
		pending []events.Record
		stream  string
		rev     int64 = -1
	)
	for {
		page, err := l.query(ctx, nil, query, stream, rev, archiveSegment)
		if err != nil {
			return total, err
		}
		for _, r := range page {
			if len(pending) >= archiveSegment && r.Stream != pending[len(pending)-1].Stream {
				if err := l.cfg.Archive.Archive(ctx, pending); err != nil {
					return total, err
				}
				total += int64(len(pending))
				pending = nil
			}
			pending = append(pending, r)
		}
		if len(page) < archiveSegment {
			break
		}
		last := page[len(page)-1]
		stream, rev = last.Stream, int64(last.Revision)
	}
	if err := l.cfg.Archive.Archive(ctx, pending); err != nil {
		return total, err
	}
	return total + int64(len(pending)), nil
}

// maintenanceTx runs fn in a transaction that holds the schema's advisory
// lock and waits at most ddlLockTimeout for each table lock.
func (l *Log) maintenanceTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, l.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lockKey(l.cfg.Schema)); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+ddlLockTimeout+`'`); err != nil {
			return err
		}
		return fn(tx)
	})
}

// literal is t as an SQL timestamptz literal, for DDL (which takes no
// parameters).
func literal(t time.Time) string {
	return "'" + t.UTC().Format("2006-01-02 15:04:05.999999Z07:00") + "'"
}

// DropStreams deletes the named event and delivery streams now, whatever
// their age, without archiving them (a tenant's own retention, shorter
// than the log's); other streams are left alone. It implements
// [events.StreamDropper].
func (l *Log) DropStreams(ctx context.Context, streams []string) (int, error) {
	if l.closed.Load() {
		return 0, fmt.Errorf("drop streams: %w", events.ErrClosed)
	}
	var expiring []string
	for _, s := range streams {
		if events.Expires(s) {
			expiring = append(expiring, s)
		}
	}
	if len(expiring) == 0 {
		return 0, nil
	}
	var n int
	err := l.pool.QueryRow(ctx, `WITH gone AS (DELETE FROM `+l.schema+`.events WHERE expires AND stream = ANY($1) RETURNING stream)
		SELECT count(DISTINCT stream) FROM gone`, expiring).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("drop streams: %w", l.translate(err))
	}
	return n, nil
}
