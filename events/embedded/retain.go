package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/hookline/hookline/events"
)

// retainChunk is how many streams one retention batch drops.
const retainChunk = 256

// RetainStats tells what one retention pass dropped.
type RetainStats struct {
	// Streams is the number of streams dropped.
	Streams int
	// Events is the number of events dropped with them.
	Events int
	// Bytes is the size of the dropped records as stored (keys and values,
	// before compression).
	Bytes int64
	// Archived is the number of records handed to Config.Archive before
	// their streams were dropped.
	Archived int
}

// Retain drops every stream that events.Expires and whose last write is
// before cutoff: its events in the global log, its index, its head. Tenant
// and endpoint streams are never dropped. It then compacts the range of the
// log it emptied, so the space is given back to the file system. Dropping
// runs in the writer, between append groups, in synced batches of up to
// retainChunk streams; a stream appended to in the meantime is kept. Safe for
// concurrent use.
func (l *Log) Retain(ctx context.Context, cutoff time.Time) (RetainStats, error) {
	var (
		stats      RetainStats
		lo, hi     uint64 // range of sequence numbers dropped
		start      = []byte{prefixTime}
		dropped    = false
		compactErr error
	)
	for {
		if err := ctx.Err(); err != nil {
			return stats, fmt.Errorf("retain before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		candidates, next, err := l.expired(start, cutoff)
		if err != nil {
			return stats, fmt.Errorf("retain before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		if len(candidates) == 0 {
			break
		}
		start = next
		if err := l.archive(ctx, candidates, &stats); err != nil {
			return stats, fmt.Errorf("retain before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		chunk, err := l.dropAll(ctx, candidates, cutoff, &lo, &hi)
		if err != nil {
			return stats, fmt.Errorf("retain before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		stats.Streams += chunk.Streams
		stats.Events += chunk.Events
		stats.Bytes += chunk.Bytes
		dropped = dropped || chunk.Events > 0
	}
	if dropped {
		compactErr = l.use(func() error { return l.db.Compact(ctx, logKey(lo), logKey(hi+1), false) })
		if compactErr != nil {
			return stats, fmt.Errorf("retain: compact: %w", compactErr)
		}
	}
	return stats, nil
}

// dropAll drops, in the writer and in one synced batch, each of the
// candidates last written before cutoff, and widens [lo, hi] to the
// sequence numbers dropped.
func (l *Log) dropAll(ctx context.Context, candidates []expiring, cutoff time.Time, lo, hi *uint64) (RetainStats, error) {
	var chunk RetainStats
	j := &job{done: make(chan error, 1), fn: func(b *pebble.Batch) error {
		for _, c := range candidates {
			s, err := l.drop(b, c, cutoff, lo, hi)
			if err != nil {
				return err
			}
			chunk.Streams += s.Streams
			chunk.Events += s.Events
			chunk.Bytes += s.Bytes
		}
		return nil
	}}
	select {
	case l.jobs <- j:
	case <-l.quit:
		return chunk, fmt.Errorf("drop: %w", events.ErrClosed)
	case <-ctx.Done():
		return chunk, fmt.Errorf("drop: %w", ctx.Err())
	}
	return chunk, <-j.done
}

// DropStreams drops the named event and delivery streams now, whatever
// their age, without archiving them (a tenant's own retention, shorter
// than the log's); other streams are left alone. It implements
// [events.StreamDropper].
func (l *Log) DropStreams(ctx context.Context, streams []string) (int, error) {
	var candidates []expiring
	for _, s := range streams {
		if events.Expires(s) {
			candidates = append(candidates, expiring{stream: s})
		}
	}
	var lo, hi uint64
	total := 0
	for len(candidates) > 0 {
		n := min(len(candidates), retainChunk)
		chunk, err := l.dropAll(ctx, candidates[:n], never, &lo, &hi)
		if err != nil {
			return total, err
		}
		total += chunk.Streams
		candidates = candidates[n:]
	}
	if total > 0 {
		if err := l.use(func() error { return l.db.Compact(ctx, logKey(lo), logKey(hi+1), false) }); err != nil {
			return total, fmt.Errorf("drop: compact: %w", err)
		}
	}
	return total, nil
}

// never is a cutoff after every write.
var never = time.Unix(1<<40, 0)

// archive hands the records of the candidates that may be dropped to
// Config.Archive, whole streams in one segment, before anything is
// dropped: a failure leaves them in the log for the next pass. A stream
// written to after this read is not dropped (drop checks its head), so
// what the archive holds is never less than what was dropped.
func (l *Log) archive(ctx context.Context, candidates []expiring, stats *RetainStats) error {
	if l.cfg.Archive == nil {
		return nil
	}
	var recs []events.Record
	for _, c := range candidates {
		if !events.Expires(c.stream) {
			continue
		}
		rs, err := l.ReadStream(ctx, c.stream, events.Forwards, 0, maxArchivedStream)
		if errors.Is(err, events.ErrStreamNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		recs = append(recs, rs...)
	}
	if err := l.cfg.Archive.Archive(ctx, recs); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	stats.Archived += len(recs)
	return nil
}

// maxArchivedStream bounds the records of one stream read for the archive:
// more than any event or delivery stream holds.
const maxArchivedStream = 1 << 20

// expiring is a stream that retention may drop, as its time key says.
type expiring struct {
	stream  string
	written time.Time
}

// expired lists up to retainChunk streams last written before cutoff, from
// time key start on, and the key to continue from.
func (l *Log) expired(start []byte, cutoff time.Time) ([]expiring, []byte, error) {
	var out []expiring
	var next []byte
	err := l.use(func() error {
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: timeUpper(cutoff)})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok := it.First(); ok && len(out) < retainChunk; ok = it.Next() {
			written, stream, err := decodeTimeKey(it.Key())
			if err != nil {
				return err
			}
			out = append(out, expiring{stream: stream, written: written})
			next = append(append([]byte(nil), it.Key()...), 0)
		}
		return it.Error()
	})
	return out, next, err
}

// drop stages in b the removal of c's stream, unless it was written since.
func (l *Log) drop(b *pebble.Batch, c expiring, cutoff time.Time, lo, hi *uint64) (RetainStats, error) {
	var s RetainStats
	h, ok, err := readHead(b, c.stream)
	if err != nil {
		return s, err
	}
	if !ok || !h.written.Before(cutoff) || !events.Expires(c.stream) {
		// A stale time key: only the current head's key is authoritative.
		if !ok || !h.written.Equal(c.written) {
			return s, b.Delete(timeKey(c.written, c.stream), nil)
		}
		return s, nil
	}
	it, err := b.NewIter(&pebble.IterOptions{LowerBound: indexKey(c.stream, 0), UpperBound: indexUpper(c.stream)})
	if err != nil {
		return s, err
	}
	for ok := it.First(); ok; ok = it.Next() {
		e, err := decodeIndex(it.Value())
		if err != nil {
			return s, errors.Join(err, it.Close())
		}
		if v, closer, err := b.Get(logKey(e.seq)); err == nil {
			s.Bytes += int64(len(v) + 9)
			closer.Close()
		}
		if err := b.Delete(logKey(e.seq), nil); err != nil {
			return s, errors.Join(err, it.Close())
		}
		s.Events++
		if *lo == 0 || e.seq < *lo {
			*lo = e.seq
		}
		*hi = max(*hi, e.seq)
	}
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return s, err
	}
	l.heads.forget(c.stream) // before the commit: a miss reads the store
	if err := errors.Join(
		b.DeleteRange(indexKey(c.stream, 0), indexUpper(c.stream), nil),
		b.Delete(headKey(c.stream), nil),
		b.Delete(timeKey(h.written, c.stream), nil),
	); err != nil {
		return s, err
	}
	s.Streams++
	l.log.Debug("stream dropped", slog.String("stream", c.stream), slog.Int("events", s.Events))
	return s, nil
}

// Run applies retention now and then every cfg.RetainEvery, dropping what
// was last written more than cfg.Retention ago, until ctx ends (it then
// returns nil) or the log closes (events.ErrClosed). A failed pass is logged
// and retried at the next tick.
func (l *Log) Run(ctx context.Context) error {
	t := time.NewTicker(l.cfg.RetainEvery)
	defer t.Stop()
	for {
		cutoff := l.cfg.Now().Add(-l.cfg.Retention)
		stats, err := l.Retain(ctx, cutoff)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, events.ErrClosed):
			return err
		case err != nil:
			l.log.Error("retention failed", slog.Any("error", err))
		case stats.Streams > 0:
			l.log.Info("retention applied", slog.Int("streams", stats.Streams), slog.Int("events", stats.Events),
				slog.Int64("bytes", stats.Bytes), slog.Int("archived", stats.Archived), slog.Time("cutoff", cutoff))
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

// DiskUsage is what the store takes on its file system, in bytes.
type DiskUsage struct {
	// Tables is the size of the live sstables: the data itself.
	Tables uint64
	// WAL is the size of the write-ahead log, including obsolete log files
	// that Pebble keeps to recycle: a bounded overhead, not data.
	WAL uint64
	// Total is everything: tables, WAL, manifest, options, and files
	// obsolete but not yet deleted.
	Total uint64
}

// DiskUsage returns what the store takes on its file system.
func (l *Log) DiskUsage() (DiskUsage, error) {
	var u DiskUsage
	err := l.use(func() error {
		m := l.db.Metrics()
		u = DiskUsage{
			Tables: m.Table.Local.LiveSize,
			WAL:    m.WAL.PhysicalSize + m.WAL.ObsoletePhysicalSize,
			Total:  m.DiskSpaceUsage(),
		}
		return nil
	})
	return u, err
}
