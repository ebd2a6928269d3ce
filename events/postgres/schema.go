package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaSQL creates or updates the log's objects in schema %[1]s, run by
// Open under the schema's advisory lock, so concurrent Opens take turns.
// Every statement is idempotent.
//
//	head             the single row whose position is the last one given
//	events           every event, LIST-partitioned by expires:
//	  events_kept      tenant and endpoint streams, never dropped
//	  events_expiring  event and delivery streams, RANGE-partitioned by
//	                   born, the time of the stream's first event; one
//	                   table per Config.PartitionEvery, listed in partitions
//	partitions       the time partitions and their bounds
//	append(...)      one append, in one statement (see appendFunc)
const schemaSQL = `
CREATE SCHEMA IF NOT EXISTS %[1]s;

CREATE TABLE IF NOT EXISTS %[1]s.head (
	one      boolean PRIMARY KEY DEFAULT true CHECK (one),
	position bigint NOT NULL
);
INSERT INTO %[1]s.head (one, position) VALUES (true, 0) ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS %[1]s.events (
	position bigint      NOT NULL,
	stream   text        NOT NULL,
	revision bigint      NOT NULL,
	id       uuid        NOT NULL,
	type     text        NOT NULL,
	data     bytea       NOT NULL,
	metadata bytea       NOT NULL,
	recorded timestamptz NOT NULL,
	expires  boolean     NOT NULL,
	born     timestamptz NOT NULL
) PARTITION BY LIST (expires);
CREATE TABLE IF NOT EXISTS %[1]s.events_kept PARTITION OF %[1]s.events FOR VALUES IN (false);
CREATE TABLE IF NOT EXISTS %[1]s.events_expiring PARTITION OF %[1]s.events FOR VALUES IN (true)
	PARTITION BY RANGE (born);

-- A stream's events share expires and born, so this is unique (stream,
-- revision) across the whole log.
CREATE UNIQUE INDEX IF NOT EXISTS events_stream_revision ON %[1]s.events (stream, revision, expires, born);
CREATE INDEX IF NOT EXISTS events_position ON %[1]s.events (position);

CREATE TABLE IF NOT EXISTS %[1]s.partitions (
	name text        PRIMARY KEY,
	lo   timestamptz NOT NULL,
	hi   timestamptz NOT NULL
);
`

// appendFunc is one append, run as one statement in its own transaction.
// p_kind is the expectation: 0 any, 1 no stream, 2 stream exists, 3 exact
// (p_expected). It answers o_status 0 with the revision and position of the
// last event (written now, or found there already: an idempotent retry), or
// o_status 1 for a wrong expected revision, with the stream's last revision
// in o_actual (NULL: no stream).
//
// Locks, always in this order, held until commit: the stream's advisory
// lock (appends to one stream take turns; others run in parallel), then the
// head row, taken last, just before the insert (see doc.go: positions
// follow commit order).
const appendFunc = `
CREATE OR REPLACE FUNCTION %[1]s.append(
	p_stream text, p_expires boolean, p_kind int, p_expected bigint, p_now timestamptz,
	p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[], p_channel text, p_head_lock text,
	OUT o_status int, OUT o_revision bigint, OUT o_position bigint, OUT o_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	v_n    int := cardinality(p_ids);
	v_last bigint;
	v_born timestamptz;
	v_at   bigint;
	v_next bigint;
	v_ids  uuid[];
BEGIN
	PERFORM pg_advisory_xact_lock(hashtextextended(p_stream, 0));
	SELECT e.revision, e.born INTO v_last, v_born
	  FROM %[1]s.events e
	 WHERE e.stream = p_stream AND e.expires = p_expires
	 ORDER BY e.revision DESC LIMIT 1;
	o_actual := v_last;

	-- v_next: the revision of the first new event, when the expectation
	-- holds; v_at: where the same events would be if this is a retry.
	CASE p_kind
	WHEN 0 THEN
		IF v_last IS NULL THEN v_next := 0; ELSE v_at := v_last + 1 - v_n; v_next := v_last + 1; END IF;
	WHEN 1 THEN
		IF v_last IS NULL THEN v_next := 0; ELSE v_at := 0; END IF;
	WHEN 2 THEN
		IF v_last IS NOT NULL THEN v_at := v_last + 1 - v_n; v_next := v_last + 1; END IF;
	ELSE
		IF v_last = p_expected THEN v_next := v_last + 1;
		ELSIF v_last > p_expected THEN v_at := p_expected + 1;
		END IF;
	END CASE;

	IF v_at >= 0 THEN
		SELECT array_agg(e.id ORDER BY e.revision), max(e.position) INTO v_ids, o_position
		  FROM %[1]s.events e
		 WHERE e.stream = p_stream AND e.expires = p_expires
		   AND e.revision >= v_at AND e.revision < v_at + v_n;
		IF v_ids = p_ids THEN
			o_status := 0;
			o_revision := v_at + v_n - 1;
			RETURN;
		END IF;
	END IF;
	IF v_next IS NULL THEN
		o_status := 1;
		o_position := NULL;
		RETURN;
	END IF;

	IF v_last IS NULL THEN
		v_born := p_now;
	END IF;
	PERFORM pg_advisory_xact_lock(hashtextextended(p_head_lock, 0));
	UPDATE %[1]s.head SET position = position + v_n RETURNING position INTO o_position;
	INSERT INTO %[1]s.events (position, stream, revision, id, type, data, metadata, recorded, expires, born)
	SELECT o_position - v_n + u.ord, p_stream, v_next + u.ord - 1, u.id, u.type, u.data, u.metadata, p_now, p_expires, v_born
	  FROM unnest(p_ids, p_types, p_data, p_metadata) WITH ORDINALITY AS u(id, type, data, metadata, ord);
	PERFORM pg_notify(p_channel, o_position::text);
	o_status := 0;
	o_revision := v_next + v_n - 1;
END
$fn$;
`

// queries are the log's statements, with its schema filled in.
type queries struct {
	append, readForwards, readBackwards, exists, readAll, page, head string
}

// columns are the columns of a record, in scan order.
const columns = `e.position, e.stream, e.revision, e.id, e.type, e.data, e.metadata, e.recorded`

func newQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	return queries{
		append: `SELECT o_status, o_revision, o_position, o_actual FROM ` + s + `.append($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		readForwards: `SELECT ` + columns + ` FROM ` + s + `.events e
			WHERE e.stream = $1 AND e.expires = $2 AND e.revision >= $3 ORDER BY e.revision LIMIT $4`,
		readBackwards: `SELECT ` + columns + ` FROM ` + s + `.events e
			WHERE e.stream = $1 AND e.expires = $2 AND e.revision <= $3 ORDER BY e.revision DESC LIMIT $4`,
		exists: `SELECT EXISTS (SELECT 1 FROM ` + s + `.events e WHERE e.stream = $1 AND e.expires = $2)`,
		readAll: `SELECT ` + columns + ` FROM ` + s + `.events e
			WHERE e.position > $1 ORDER BY e.position LIMIT $2`,
		// page is a subscriber's read: the head and, in the same snapshot,
		// up to $4 matching events after $1 and not after the head. A row
		// with NULL events when none match.
		page: `SELECT h.position, ` + columns + ` FROM ` + s + `.head h LEFT JOIN LATERAL (
			SELECT ` + columns + ` FROM ` + s + `.events e
			 WHERE e.position > $1 AND e.position <= h.position
			   AND (cardinality($2::text[]) = 0 OR e.stream LIKE ANY ($2::text[]))
			   AND (cardinality($3::text[]) = 0 OR e.type = ANY ($3::text[]))
			 ORDER BY e.position LIMIT $4) e ON true`,
		head: `SELECT position FROM ` + s + `.head`,
	}
}

// lockKey names the schema's advisory lock, taken by migrations and
// partition maintenance; hashed by the server.
func lockKey(schema string) string { return "hookline/events/postgres:" + schema }

// migrate creates or updates the log's objects in schema, in one
// transaction under the schema's advisory lock.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	s := pgx.Identifier{schema}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lockKey(schema)); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(schemaSQL, s)); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(appendFunc, s)); err != nil {
			return fmt.Errorf("create function append: %w", err)
		}
		return nil
	})
}
