package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
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
//	schema_version   the digest of these definitions, once they ran (see migrate)
//	data_keys        the vault: each tenant's current data key, wrapped
//	                 (see vault.go); rows are deleted, unlike events
//	vault_kek        the id of the key-encryption key new data keys are
//	                 wrapped under (the key itself is kept elsewhere)
//	append_group(..) a group of appends, in one statement (see appendGroupFunc)
//	append(...)      one append: append_group of one (see appendFunc)
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
	born     timestamptz NOT NULL,
	part     smallint    NOT NULL DEFAULT 0
) PARTITION BY LIST (expires);
-- Logs created before delivery partitions: their events are of none.
ALTER TABLE %[1]s.events ADD COLUMN IF NOT EXISTS part smallint NOT NULL DEFAULT 0;
CREATE TABLE IF NOT EXISTS %[1]s.events_kept PARTITION OF %[1]s.events FOR VALUES IN (false);
CREATE TABLE IF NOT EXISTS %[1]s.events_expiring PARTITION OF %[1]s.events FOR VALUES IN (true)
	PARTITION BY RANGE (born);

-- A stream's events share expires and born, so this is unique (stream,
-- revision) across the whole log.
CREATE UNIQUE INDEX IF NOT EXISTS events_stream_revision ON %[1]s.events (stream, revision, expires, born);
CREATE INDEX IF NOT EXISTS events_position ON %[1]s.events (position);

CREATE TABLE IF NOT EXISTS %[1]s.data_keys (
	tenant_id text  PRIMARY KEY,
	id        text  NOT NULL,
	sealed    bytea NOT NULL
);
-- Vaults from before key-encryption keys: their keys are sealed under
-- the master key ('').
ALTER TABLE %[1]s.data_keys ADD COLUMN IF NOT EXISTS kek text NOT NULL DEFAULT '';
CREATE TABLE IF NOT EXISTS %[1]s.vault_kek (
	one boolean PRIMARY KEY DEFAULT true CHECK (one),
	id  text    NOT NULL
);
INSERT INTO %[1]s.vault_kek (one, id) VALUES (true, '') ON CONFLICT DO NOTHING;

CREATE TABLE IF NOT EXISTS %[1]s.partitions (
	name text        PRIMARY KEY,
	lo   timestamptz NOT NULL,
	hi   timestamptz NOT NULL
);

CREATE TABLE IF NOT EXISTS %[1]s.schema_version (
	one    boolean PRIMARY KEY DEFAULT true CHECK (one),
	digest text    NOT NULL
);
`

// appendGroupFunc is a group of appends, in order, in one statement: the
// writer's transaction (see writer.go). Append i is p_streams[i], p_expires[i],
// its expectation p_kinds[i] (0 any, 1 no stream, 2 stream exists, 3 exact
// p_expected[i]) and its p_counts[i] events, the next ones of p_ids,
// p_types, p_data, p_metadata and p_parts (delivery partitions). It returns one row per append, in order:
// o_status 0 with the revision and position of the append's last event
// (written now, or found there already: an idempotent retry), or o_status 1
// for a wrong expected revision, with the stream's last revision in
// o_actual (NULL: no stream). A failed expectation writes nothing and raises
// nothing: it does not disturb the other appends. Each append sees the
// writes of the group's earlier ones. When anything was written it notifies
// p_channel (unless NULL) once, with the new head.
//
// Locks, held until commit, always in this order: first the streams'
// advisory locks, each once, in increasing order of key (appends to one
// stream take turns; others run in parallel; two groups never wait for each
// other in a cycle); then, at the group's first write, the head lock and
// the head row, read once and updated once at the end (see doc.go:
// positions follow commit order). FOR UPDATE keeps that read honest under
// any isolation level: it reads the last head committed, or fails.
const appendGroupFunc = `
CREATE OR REPLACE FUNCTION %[1]s.append_group(
	p_streams text[], p_expires boolean[], p_kinds int[], p_expected bigint[], p_counts int[],
	p_now timestamptz, p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[],
	p_channel text, p_head_lock text, p_parts smallint[])
RETURNS TABLE (o_status int, o_revision bigint, o_position bigint, o_actual bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	v_appends int := cardinality(p_streams);
	v_events  int := cardinality(p_ids);
	-- Per event: its position (NULL: not written) and revision; the append
	-- it belongs to. Per append: its stream's born.
	v_pos     bigint[] := array_fill(NULL::bigint, ARRAY[v_events]);
	v_rev     bigint[] := array_fill(NULL::bigint, ARRAY[v_events]);
	v_app     int[] := array_fill(NULL::int, ARRAY[v_events]);
	v_borns   timestamptz[] := array_fill(NULL::timestamptz, ARRAY[v_appends]);
	v_head    bigint;           -- the last position given; NULL until the first write
	v_flushed bigint;           -- the last position inserted
	v_pending text[] := '{}';   -- the streams of the events given and not inserted
	v_off     int := 0;         -- the events of the appends before this one
	v_key     bigint;
	v_stream  text;
	v_n       int;
	v_last    bigint;
	v_born    timestamptz;
	v_at      bigint;
	v_next    bigint;
	v_ids     uuid[];
	v_found   bigint;
BEGIN
	FOR v_key IN SELECT DISTINCT hashtextextended(s, 0) FROM unnest(p_streams) s ORDER BY 1 LOOP
		PERFORM pg_advisory_xact_lock(v_key);
	END LOOP;

	FOR i IN 1 .. v_appends + 1 LOOP
		-- Insert the events given so far, all at once, at the end and
		-- before an append reads a stream that has some of them: each
		-- append sees the group's earlier writes.
		IF i > v_appends OR p_streams[i] = ANY (v_pending) THEN
			IF v_head > v_flushed THEN
				INSERT INTO %[1]s.events (position, stream, revision, id, type, data, metadata, recorded, expires, born, part)
				SELECT u.pos, p_streams[u.app], u.rev, u.id, u.type, u.data, u.metadata, p_now, p_expires[u.app], v_borns[u.app], u.part
				  FROM unnest(v_pos, v_rev, v_app, p_ids, p_types, p_data, p_metadata, p_parts)
				       AS u(pos, rev, app, id, type, data, metadata, part)
				 WHERE u.pos > v_flushed;
				v_flushed := v_head;
				v_pending := '{}';
			END IF;
			EXIT WHEN i > v_appends;
		END IF;

		v_stream := p_streams[i];
		v_n := p_counts[i];
		v_last := NULL; v_born := NULL; v_at := NULL; v_next := NULL;
		SELECT e.revision, e.born INTO v_last, v_born
		  FROM %[1]s.events e
		 WHERE e.stream = v_stream AND e.expires = p_expires[i]
		 ORDER BY e.revision DESC LIMIT 1;
		o_status := 0; o_revision := NULL; o_position := NULL; o_actual := v_last;

		-- v_next: the revision of the first new event, when the expectation
		-- holds; v_at: where the same events would be if this is a retry.
		CASE p_kinds[i]
		WHEN 0 THEN
			IF v_last IS NULL THEN v_next := 0; ELSE v_at := v_last + 1 - v_n; v_next := v_last + 1; END IF;
		WHEN 1 THEN
			IF v_last IS NULL THEN v_next := 0; ELSE v_at := 0; END IF;
		WHEN 2 THEN
			IF v_last IS NOT NULL THEN v_at := v_last + 1 - v_n; v_next := v_last + 1; END IF;
		ELSE
			IF v_last = p_expected[i] THEN v_next := v_last + 1;
			ELSIF v_last > p_expected[i] THEN v_at := p_expected[i] + 1;
			END IF;
		END CASE;

		IF v_at >= 0 THEN
			SELECT array_agg(e.id ORDER BY e.revision), max(e.position) INTO v_ids, v_found
			  FROM %[1]s.events e
			 WHERE e.stream = v_stream AND e.expires = p_expires[i]
			   AND e.revision >= v_at AND e.revision < v_at + v_n;
			IF v_ids = p_ids[v_off + 1 : v_off + v_n] THEN
				-- A retry of an append that landed: its original answer.
				o_revision := v_at + v_n - 1;
				o_position := v_found;
				v_next := NULL;
			ELSIF v_next IS NULL THEN
				o_status := 1;
			END IF;
		ELSIF v_next IS NULL THEN
			o_status := 1;
		END IF;

		IF v_next IS NOT NULL THEN
			IF v_head IS NULL THEN
				PERFORM pg_advisory_xact_lock(hashtextextended(p_head_lock, 0));
				SELECT h.position INTO v_head FROM %[1]s.head h FOR UPDATE;
				v_flushed := v_head;
			END IF;
			FOR k IN 1 .. v_n LOOP
				v_pos[v_off + k] := v_head + k;
				v_rev[v_off + k] := v_next + k - 1;
				v_app[v_off + k] := i;
			END LOOP;
			v_borns[i] := coalesce(v_born, p_now);
			v_pending := array_append(v_pending, v_stream);
			v_head := v_head + v_n;
			o_revision := v_next + v_n - 1;
			o_position := v_head;
		END IF;
		RETURN NEXT;
		v_off := v_off + v_n;
	END LOOP;

	IF v_head IS NOT NULL THEN
		UPDATE %[1]s.head SET position = v_head;
		IF p_channel IS NOT NULL THEN
			PERFORM pg_notify(p_channel, v_head::text);
		END IF;
	END IF;
END
$fn$;
`

// appendFunc is one append: append_group with one append, same arguments
// and answer, its events of no partition. The log itself only calls
// append_group; append stays for the nodes of an older version during a
// rolling upgrade (they take the same locks in the same order), and for
// tests that hold an append's transaction open. (The append_group of before
// partitions, without p_parts, stays too, for the same older nodes: its
// events get the column's default, no partition.)
const appendFunc = `
CREATE OR REPLACE FUNCTION %[1]s.append(
	p_stream text, p_expires boolean, p_kind int, p_expected bigint, p_now timestamptz,
	p_ids uuid[], p_types text[], p_data bytea[], p_metadata bytea[], p_channel text, p_head_lock text,
	OUT o_status int, OUT o_revision bigint, OUT o_position bigint, OUT o_actual bigint)
LANGUAGE sql AS $fn$
	SELECT g.o_status, g.o_revision, g.o_position, g.o_actual
	  FROM %[1]s.append_group(ARRAY[p_stream], ARRAY[p_expires], ARRAY[p_kind], ARRAY[p_expected],
	                          ARRAY[cardinality(p_ids)], p_now, p_ids, p_types, p_data, p_metadata,
	                          p_channel, p_head_lock, array_fill(0::smallint, ARRAY[cardinality(p_ids)])) g
$fn$;
`

// queries are the log's statements, with its schema filled in.
type queries struct {
	appendGroup, readForwards, readBackwards, exists, readAll, page, head string
}

// columns are the columns of a record, in scan order.
const columns = `e.position, e.stream, e.revision, e.id, e.type, e.data, e.metadata, e.recorded, e.part`

func newQueries(schema string) queries {
	s := pgx.Identifier{schema}.Sanitize()
	return queries{
		appendGroup: `SELECT o_status, o_revision, o_position, o_actual FROM ` + s + `.append_group($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
		readForwards: `SELECT ` + columns + ` FROM ` + s + `.events e
			WHERE e.stream = $1 AND e.expires = $2 AND e.revision >= $3 ORDER BY e.revision LIMIT $4`,
		readBackwards: `SELECT ` + columns + ` FROM ` + s + `.events e
			WHERE e.stream = $1 AND e.expires = $2 AND e.revision <= $3 ORDER BY e.revision DESC LIMIT $4`,
		exists: `SELECT EXISTS (SELECT 1 FROM ` + s + `.events e WHERE e.stream = $1 AND e.expires = $2)`,
		readAll: `SELECT ` + columns + ` FROM ` + s + `.events e
			WHERE e.position > $1 ORDER BY e.position LIMIT $2`,
		// page is a subscriber's read: the head and, in the same snapshot,
		// up to $4 matching events after $1 and not after the head. A row
		// with NULL events when none match. $5 is the partitions to pass,
		// NULL for all.
		page: `SELECT h.position, ` + columns + ` FROM ` + s + `.head h LEFT JOIN LATERAL (
			SELECT ` + columns + ` FROM ` + s + `.events e
			 WHERE e.position > $1 AND e.position <= h.position
			   AND (cardinality($2::text[]) = 0 OR e.stream LIKE ANY ($2::text[]))
			   AND (cardinality($3::text[]) = 0 OR e.type = ANY ($3::text[]))
			   AND ($5::smallint[] IS NULL OR e.part = ANY ($5::smallint[]))
			 ORDER BY e.position LIMIT $4) e ON true`,
		head: `SELECT position FROM ` + s + `.head`,
	}
}

// lockKey names the schema's advisory lock, taken by migrations and
// partition maintenance; hashed by the server.
func lockKey(schema string) string { return "hookline/events/postgres:" + schema }

// migrate creates or updates the log's objects in schema, in one
// transaction under the schema's advisory lock, unless they are current:
// the digest of their definitions is recorded in schema_version, and a
// schema that records this build's digest is left alone. Every node runs
// migrate when it opens the log, and the definitions' statements lock the
// events table even when they change nothing (ALTER TABLE ... IF NOT
// EXISTS takes an ACCESS EXCLUSIVE lock before it finds the column there,
// CREATE INDEX IF NOT EXISTS a SHARE lock before it finds the index), so
// every restart of a node stopped every append and read of the cluster
// until the migration's transaction ended: a stall at every endpoint in a
// rolling restart.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	s := pgx.Identifier{schema}.Sanitize()
	want := schemaDigest(s)
	if have, err := recordedDigest(ctx, pool, s); err != nil {
		return err
	} else if have == want {
		return nil
	}
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1, 0))`, lockKey(schema)); err != nil {
			return fmt.Errorf("lock schema: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(schemaSQL, s)); err != nil {
			return fmt.Errorf("create tables: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(appendGroupFunc, s)); err != nil {
			return fmt.Errorf("create function append_group: %w", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(appendFunc, s)); err != nil {
			return fmt.Errorf("create function append: %w", err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO `+s+`.schema_version (one, digest) VALUES (true, $1)
			ON CONFLICT (one) DO UPDATE SET digest = excluded.digest`, want); err != nil {
			return fmt.Errorf("record the schema's version: %w", err)
		}
		return nil
	})
}

// schemaDigest is the digest of the definitions migrate runs in schema s
// (quoted).
func schemaDigest(s string) string {
	h := sha256.New()
	for _, def := range []string{schemaSQL, appendGroupFunc, appendFunc} {
		h.Write([]byte(fmt.Sprintf(def, s)))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recordedDigest reads the digest schema s (quoted) records; "" when it
// records none (a new schema, or one from before schema_version).
func recordedDigest(ctx context.Context, pool *pgxpool.Pool, s string) (string, error) {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s+".schema_version").Scan(&exists); err != nil {
		return "", fmt.Errorf("read the schema's version: %w", err)
	}
	if !exists {
		return "", nil
	}
	var digest string
	err := pool.QueryRow(ctx, `SELECT digest FROM `+s+`.schema_version`).Scan(&digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read the schema's version: %w", err)
	}
	return digest, nil
}
