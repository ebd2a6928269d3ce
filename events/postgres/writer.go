package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/hookline/hookline/events"
)

// Group commit limits: a group stops growing at maxGroup appends or
// maxGroupBytes of payload, whichever comes first. maxGroup also bounds the
// advisory locks that one transaction holds (one per stream, plus the
// head's), far below PostgreSQL's shared lock table
// (max_locks_per_transaction × max_connections: 6,400 by default), even
// with a few nodes writing at once.
const (
	maxGroup      = 128
	maxGroupBytes = 16 << 20
)

// appendReq is one Append waiting for the writer, its arguments already in
// the form that the append function takes (converted by the caller's
// goroutine, not the writer's).
type appendReq struct {
	stream   string
	expected events.ExpectedRevision
	expires  bool
	kind     int32 // 0 any, 1 no stream, 2 stream exists, 3 exact
	exact    int64 // the revision when kind is 3
	ids      [][16]byte
	types    []string
	data     [][]byte
	meta     [][]byte
	parts    []int16
	size     int // bytes of data and metadata

	res  events.AppendResult
	err  error
	done chan struct{} // closed by the writer once res and err are set
}

// newAppendReq checks an append's arguments and converts them for the
// append function. Text that PostgreSQL would refuse (a NUL byte, invalid
// UTF-8) is refused here, so that it never fails a whole group.
func (l *Log) newAppendReq(stream string, expected events.ExpectedRevision, evs []events.Event) (*appendReq, error) {
	if err := events.CheckAppend(stream, l.cfg.MaxEventSize, evs); err != nil {
		return nil, err
	}
	if !storable(stream) {
		return nil, fmt.Errorf("append %q: %w: the stream name is not UTF-8 text without NUL", stream, events.ErrInvalid)
	}
	r := &appendReq{stream: stream, expected: expected, expires: events.Expires(stream), done: make(chan struct{})}
	switch e := expected.(type) {
	case events.Any:
		r.kind = 0
	case events.NoStream:
		r.kind = 1
	case events.StreamExists:
		r.kind = 2
	case events.Exact:
		r.kind, r.exact = 3, clampRevision(events.Revision(e))
	default:
		return nil, fmt.Errorf("append %s: %w: expected revision %T", stream, events.ErrInvalid, expected)
	}
	r.ids = make([][16]byte, len(evs))
	r.types = make([]string, len(evs))
	r.data = make([][]byte, len(evs))
	r.meta = make([][]byte, len(evs))
	r.parts = make([]int16, len(evs))
	for i, ev := range evs {
		if !storable(ev.Type) {
			return nil, fmt.Errorf("append %s: %w: the type of event %d is not UTF-8 text without NUL", stream, events.ErrInvalid, i)
		}
		r.ids[i], r.types[i] = ev.ID, ev.Type
		r.data[i], r.meta[i] = nonNil(ev.Data), nonNil(ev.Metadata)
		r.parts[i] = int16(ev.Partition)
		r.size += len(ev.Data) + len(ev.Metadata)
	}
	return r, nil
}

// storable reports whether s can be stored as text in a UTF8 database.
func storable(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// write is the writer goroutine, the only one that appends. It takes appends
// in groups: one waiting append, then every other append already waiting
// (appends is unbuffered, so those are the callers blocked in Append while
// the previous group committed), runs them in one transaction and commits
// once (commitGroup). It ends at Close, after the group in flight: its
// statements run under a context of their own, so that every caller whose
// append it took learns the real outcome.
func (l *Log) write() {
	defer close(l.writerDone)
	ctx := context.Background()
	group := make([]*appendReq, 0, maxGroup)
	for {
		select {
		case <-l.quit:
			return
		case r := <-l.appends:
			group = append(group[:0], r)
			size := r.size
		drain:
			for len(group) < maxGroup && size < maxGroupBytes {
				select {
				case r := <-l.appends:
					group = append(group, r)
					size += r.size
				default:
					break drain
				}
			}
			l.commitGroup(ctx, group)
			clear(group)
		}
	}
}

// commitGroup runs group in one transaction, commits it and answers each
// caller with its own outcome. When the server refused the group (an error
// raised by one of its appends: a stream name too long to index, a missing
// partition), nothing of it was written, and each append runs again alone
// (appendOne), for its own outcome: one such append costs its group the
// fast path, not its result. When the outcome is unknown (the connection
// broke after the statement was sent), every append of the group reports
// the error, as a lone append would.
func (l *Log) commitGroup(ctx context.Context, group []*appendReq) {
	now := l.cfg.Now()
	err := l.runGroup(ctx, group, now)
	switch {
	case err == nil:
		l.stats.groups.Add(1)
		for _, r := range group {
			if r.err == nil {
				l.stats.appends.Add(1)
			}
		}
	case unwritten(err):
		l.stats.fallbacks.Add(1)
		l.log.Debug("append group refused, appending one at a time", slog.Int("appends", len(group)), slog.Any("error", err))
		for _, r := range group {
			r.res, r.err = l.appendOne(ctx, r, now)
		}
	default:
		for _, r := range group {
			r.res, r.err = events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, l.translate(err))
		}
	}
	for _, r := range group {
		close(r.done)
	}
}

// runGroup runs the appends of group, in order, in one statement in
// autocommit: one round trip, one transaction, one commit (see
// appendGroupFunc). It sets each append's result, which holds once it
// returns nil: rows.Err reports the commit's outcome, after the rows.
func (l *Log) runGroup(ctx context.Context, group []*appendReq, now time.Time) error {
	var (
		nev      int
		streams  = make([]string, len(group))
		expires  = make([]bool, len(group))
		kinds    = make([]int32, len(group))
		expected = make([]int64, len(group))
		counts   = make([]int32, len(group))
	)
	for i, r := range group {
		streams[i], expires[i], kinds[i], expected[i], counts[i] = r.stream, r.expires, r.kind, r.exact, int32(len(r.ids))
		nev += len(r.ids)
	}
	ids, types, data, meta := make([][16]byte, 0, nev), make([]string, 0, nev), make([][]byte, 0, nev), make([][]byte, 0, nev)
	parts := make([]int16, 0, nev)
	for _, r := range group {
		ids, types = append(ids, r.ids...), append(types, r.types...)
		data, meta = append(data, r.data...), append(meta, r.meta...)
		parts = append(parts, r.parts...)
	}
	rows, err := l.pool.Query(ctx, l.q.appendGroup, streams, expires, kinds, expected, counts, now,
		ids, types, data, meta, l.channel, l.headLock, parts)
	if err != nil {
		return err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			status           int32
			rev, pos, actual *int64
		)
		if err := rows.Scan(&status, &rev, &pos, &actual); err != nil {
			return err
		}
		if n < len(group) {
			group[n].res, group[n].err = group[n].result(status, rev, pos, actual)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != len(group) {
		return fmt.Errorf("append_group answered %d rows for %d appends", n, len(group))
	}
	return nil
}

// unwritten reports whether err, from runGroup, says for sure that nothing
// was written: the server answered with an error (its transaction was
// rolled back), or the statement was never sent.
func unwritten(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Severity == "ERROR"
	}
	return pgconn.SafeToRetry(err)
}

// appendOne runs r alone, in a group of its own: the fallback of a group
// that the server refused. It answers the errors that one append can
// recover from.
func (l *Log) appendOne(ctx context.Context, r *appendReq, now time.Time) (events.AppendResult, error) {
	group := []*appendReq{r}
	for attempt := 0; ; attempt++ {
		err := l.runGroup(ctx, group, now)
		switch {
		case err == nil:
			return r.res, r.err
		case attempt == 0 && r.expires && noPartition(err):
			// A new expiring stream at a time that no partition covers
			// yet (Run was not running): create it and try again.
			if _, perr := l.createPartition(ctx, now); perr != nil {
				return events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, l.translate(perr))
			}
		case attempt == 0 && isCode(err, uniqueViolation):
			// Only a writer that bypasses append_group's stream locks can
			// get here: run the append again, which now sees that writer's
			// events and answers a wrong revision or an idempotent retry.
		default:
			return events.AppendResult{}, fmt.Errorf("append %s: %w", r.stream, l.translate(err))
		}
	}
}

// result is the outcome of r from the append function's answer.
func (r *appendReq) result(status int32, rev, pos, actual *int64) (events.AppendResult, error) {
	if status == 0 {
		return events.AppendResult{Revision: events.Revision(*rev), Position: position(*pos)}, nil
	}
	return events.AppendResult{}, wrongRevision(r.stream, r.expected, actual)
}

// WriterStats counts the writer's work since Open.
type WriterStats struct {
	// Groups is the number of transactions committed for groups of appends
	// (one WAL flush each), including groups of one.
	Groups uint64
	// Appends is the number of appends acknowledged in them, idempotent
	// retries included; Appends/Groups is the mean group size.
	Appends uint64
	// Fallbacks is the number of groups that failed before their commit
	// and whose appends then ran one at a time.
	Fallbacks uint64
}

// writerStats are the counters behind [Log.WriterStats].
type writerStats struct {
	groups, appends, fallbacks atomic.Uint64
}

// WriterStats returns the writer's counters. Safe for concurrent use.
func (l *Log) WriterStats() WriterStats {
	return WriterStats{Groups: l.stats.groups.Load(), Appends: l.stats.appends.Load(), Fallbacks: l.stats.fallbacks.Load()}
}
