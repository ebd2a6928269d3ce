package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/events"
)

var _ events.Log = (*Log)(nil)

// Log is the events.Log on PostgreSQL. It is safe for concurrent use; the
// zero value is not usable: get one from [Open].
type Log struct {
	cfg      Config
	log      *slog.Logger
	pool     *pgxpool.Pool
	q        queries
	schema   string // quoted
	channel  string // of the append notifications
	headLock string // the key of the advisory lock that orders positions

	closed atomic.Bool
	quit   chan struct{} // closed by Close

	appends    chan *appendReq // to the writer; unbuffered, see write
	writerDone chan struct{}   // closed when the writer has ended
	stats      writerStats

	wake         waker              // woken by the listener
	stopListen   context.CancelFunc // ends the listener
	listenerDone chan struct{}      // closed when the listener has ended
}

// Open connects to the database, creates or updates the log's schema
// (idempotent; concurrent Opens take turns), makes sure the time partitions
// for now and the next two periods exist, starts listening for appends and
// starts the writer (see [Log.Append]). The caller must Close the log, and
// may run [Log.Run] to maintain the partitions. ctx bounds Open only.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil { // Validate parsed it already
		return nil, fmt.Errorf("postgres: parse DSN: %w", err)
	}
	withoutJIT(pcfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	l := &Log{
		cfg:          cfg,
		log:          cfg.Logger.With(slog.String("schema", cfg.Schema)),
		pool:         pool,
		q:            newQueries(cfg.Schema),
		schema:       pgx.Identifier{cfg.Schema}.Sanitize(),
		channel:      cfg.Schema + ".appended",
		headLock:     "hookline/events/postgres/head:" + cfg.Schema,
		quit:         make(chan struct{}),
		appends:      make(chan *appendReq),
		writerDone:   make(chan struct{}),
		wake:         newWaker(),
		listenerDone: make(chan struct{}),
	}
	if err := migrate(ctx, pool, cfg.Schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate schema %s: %w", cfg.Schema, err)
	}
	if _, err := l.createAhead(ctx, cfg.Now()); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	conn, err := l.listen(ctx)
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: open: %w", err)
	}
	lctx, stop := context.WithCancel(context.Background())
	l.stopListen = stop
	go l.listener(lctx, conn)
	go l.write()
	l.log.Debug("events log opened")
	return l, nil
}

// Close ends the writer and the listener and closes the connections, after
// the calls in flight have returned theirs: the writer commits the group it
// holds and answers its callers; appends still waiting for it, live
// subscriptions and calls after Close end with [events.ErrClosed].
func (l *Log) Close() error {
	if !l.closed.CompareAndSwap(false, true) {
		return fmt.Errorf("postgres: close: %w", events.ErrClosed)
	}
	close(l.quit)
	<-l.writerDone
	l.stopListen()
	<-l.listenerDone
	l.pool.Close()
	return nil
}

// Append writes evs to the end of stream, atomically, and returns once
// they are committed; see events.Log and the package doc. The Log's writer commits
// the appends waiting for it together, in one transaction: each append is
// checked and written as if alone, and a failing one (a wrong expected
// revision, say) fails alone. ctx bounds the wait for the writer to take
// the append: an append whose ctx ends before is dropped, unwritten. Once
// taken, Append waits for its group's outcome whatever ctx does (one group
// away), so the caller learns for sure whether the events were written.
func (l *Log) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if l.closed.Load() {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, events.ErrClosed)
	}
	r, err := l.newAppendReq(stream, expected, evs)
	if err != nil {
		return events.AppendResult{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, err)
	}
	select {
	case l.appends <- r:
	case <-l.quit:
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, events.ErrClosed)
	case <-ctx.Done():
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, ctx.Err())
	}
	<-r.done
	return r.res, r.err
}

// wrongRevision is the error of an append whose expectation failed; actual
// is the stream's last revision, nil when it does not exist.
func wrongRevision(stream string, expected events.ExpectedRevision, actual *int64) error {
	e := &events.WrongRevisionError{Stream: stream, Expected: expected}
	if actual != nil {
		e.Actual, e.Exists = events.Revision(*actual), true
	}
	return e
}

// ReadStream reads at most max events of stream from revision from, in the
// given direction; see events.Log.
func (l *Log) ReadStream(ctx context.Context, stream string, dir events.Direction, from events.Revision, n int) ([]events.Record, error) {
	if l.closed.Load() {
		return nil, fmt.Errorf("read %s: %w", stream, events.ErrClosed)
	}
	if stream == "" {
		return nil, fmt.Errorf("read: %w: empty stream name", events.ErrInvalid)
	}
	query := l.q.readForwards
	if dir == events.Backwards {
		query = l.q.readBackwards
	}
	expires := events.Expires(stream)
	recs, err := l.query(ctx, nil, query, stream, expires, clampRevision(from), max(n, 0))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	if len(recs) > 0 {
		return recs, nil
	}
	var exists bool
	if err := l.pool.QueryRow(ctx, l.q.exists, stream, expires).Scan(&exists); err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, l.translate(err))
	}
	if !exists {
		return nil, fmt.Errorf("read %s: %w", stream, events.ErrStreamNotFound)
	}
	return recs, nil
}

// ReadAll reads at most max events of the whole log after from, in
// position order; see events.Log.
func (l *Log) ReadAll(ctx context.Context, from events.Position, n int) ([]events.Record, error) {
	if l.closed.Load() {
		return nil, fmt.Errorf("read all: %w", events.ErrClosed)
	}
	recs, err := l.query(ctx, nil, l.q.readAll, clampPosition(from), max(n, 0))
	if err != nil {
		return nil, fmt.Errorf("read all after %s: %w", from, err)
	}
	return recs, nil
}

// Head returns the position of the last event appended; see events.Log. It
// is the head row: the last position given, committed with its events.
func (l *Log) Head(ctx context.Context) (events.Position, error) {
	if l.closed.Load() {
		return events.Start, fmt.Errorf("head: %w", events.ErrClosed)
	}
	var pos int64
	if err := l.pool.QueryRow(ctx, l.q.head).Scan(&pos); err != nil {
		return events.Start, fmt.Errorf("head: %w", l.translate(err))
	}
	return position(pos), nil
}

// query runs a read of records, appending them to buf.
func (l *Log) query(ctx context.Context, buf []events.Record, sql string, args ...any) ([]events.Record, error) {
	rows, err := l.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, l.translate(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			r        events.Record
			pos, rev int64
			id       [16]byte
			part     int16
		)
		if err := rows.Scan(&pos, &r.Stream, &rev, &id, &r.Type, &r.Data, &r.Metadata, &r.Recorded, &part); err != nil {
			return nil, l.translate(err)
		}
		r.Position, r.Revision, r.ID, r.Partition = position(pos), events.Revision(rev), id, events.Partition(part)
		buf = append(buf, r)
	}
	if err := rows.Err(); err != nil {
		return nil, l.translate(err)
	}
	return buf, nil
}

// position is the events.Position of a log position: Commit and Prepare
// are both the head counter's value.
func position(p int64) events.Position {
	return events.Position{Commit: uint64(p), Prepare: uint64(p)}
}

// clampPosition is from's log position, as the bigint the tables hold.
func clampPosition(from events.Position) int64 {
	return int64(min(from.Commit, math.MaxInt64))
}

// clampRevision is r as a bigint: events.End and other revisions beyond
// any stream become the largest one.
func clampRevision(r events.Revision) int64 {
	return int64(min(uint64(r), math.MaxInt64))
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// SQLSTATE codes that translate looks at.
const (
	uniqueViolation      = "23505"
	checkViolation       = "23514"
	invalidByteSequence  = "22021"
	untranslatableChar   = "22P05"
	programLimitExceeded = "54000"
	stringDataRightTrunc = "22001"
)

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// noPartition reports whether err is PostgreSQL's "no partition of relation
// found for row".
func noPartition(err error) bool { return isCode(err, checkViolation) }

// translate maps a driver error to the sentinels of package events, at the
// boundary: after Close, anything is events.ErrClosed; text the server
// cannot store (a NUL byte in a stream name, invalid UTF-8) or a stream
// name too long to index is events.ErrInvalid. Everything else is returned
// as it is, wrapped by the caller with what it was doing.
func (l *Log) translate(err error) error {
	if err == nil {
		return nil
	}
	if l.closed.Load() {
		return fmt.Errorf("%w (%v)", events.ErrClosed, err)
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case invalidByteSequence, untranslatableChar, programLimitExceeded, stringDataRightTrunc:
			return fmt.Errorf("%w: %s", events.ErrInvalid, pgErr.Message)
		}
	}
	return err
}

// waitOrQuit waits for d, ctx or Close; it reports false when the wait was
// cut short.
func (l *Log) waitOrQuit(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-l.quit:
		return false
	}
}

// withoutJIT turns PostgreSQL's JIT compilation off for the log's
// sessions, unless the DSN sets it (options=-cjit=on, or a jit
// parameter). The log's queries read a few hundred rows by index, but a
// subscriber's page joins the one-row head table, whose row estimate
// (never analyzed) puts the generic plan's cost far above jit_above_cost:
// every page then spent 180-270 ms compiling itself to run for one, which
// was the subscribers' lag under load.
func withoutJIT(params map[string]string) {
	if _, set := params["jit"]; set || strings.Contains(params["options"], "jit") {
		return
	}
	params["jit"] = "off"
}
