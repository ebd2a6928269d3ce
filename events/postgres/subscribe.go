package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookline/hookline/events"
)

// subscribePage is how many records a subscriber reads at a time, and so
// the largest batch it hands to fn.
const subscribePage = 512

// waker wakes every waiting subscriber at once: a channel closed and
// replaced on each wake.
type waker struct {
	mu sync.Mutex // guards ch
	ch chan struct{}
}

func newWaker() waker { return waker{ch: make(chan struct{})} }

// wait returns a channel closed at the next wake.
func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

// wake closes the current channel and makes the next one.
func (w *waker) wake() {
	w.mu.Lock()
	close(w.ch)
	w.ch = make(chan struct{})
	w.mu.Unlock()
}

// listen opens the listener's own connection (outside the pool: it stays
// in LISTEN for the life of the log) and listens on the log's channel.
func (l *Log) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, fmt.Errorf("listen: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return nil, errors.Join(fmt.Errorf("listen: %w", err), conn.Close(ctx))
	}
	return conn, nil
}

// listener wakes the subscribers at each notification of an append, until
// ctx ends (Close). When its connection fails it wakes them anyway (a
// notification may have been lost), and connects again, backing off up to
// PollEvery; subscribers meanwhile fall back to polling.
func (l *Log) listener(ctx context.Context, conn *pgx.Conn) {
	defer close(l.listenerDone)
	backoff := 50 * time.Millisecond
	for {
		if conn == nil {
			var err error
			if conn, err = l.listen(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				l.log.Warn("events listener cannot reconnect", slog.Any("error", err), slog.Duration("retry_in", backoff))
				if !l.waitOrQuit(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, l.cfg.PollEvery)
				continue
			}
			backoff = 50 * time.Millisecond
			l.wake.wake()
		}
		_, err := conn.WaitForNotification(ctx)
		if err == nil {
			l.wake.wake()
			continue
		}
		closeCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(closeCtx) // the connection is being dropped: its close error says nothing more
		cancel()
		conn = nil
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("events listener lost its connection", slog.Any("error", err))
		l.wake.wake()
	}
}

// Subscribe calls fn with the events after from that pass filter, in
// position order and in batches: first those already in the log, then new
// ones as they commit; see events.Log.
//
// Catch-up and live are one loop: read a page after the last position seen,
// hand it to fn, and when the log has nothing more, wait for a notification
// of an append (LISTEN/NOTIFY; the notification is sent at commit), for the
// fallback poll (Config.PollEvery), for ctx or for Close. The wake channel
// is taken before each read, so an append that commits between the read and
// the wait is not missed. Each page is read with the head in the same
// snapshot; since every position up to the head is committed (the package doc), a
// page shorter than asked means nothing else up to the head matches, and the
// subscriber moves its position to the head: a selective filter does not
// read the same foreign events again and again.
func (l *Log) Subscribe(ctx context.Context, from events.Position, filter events.Filter, fn events.SubscribeFunc) error {
	if l.closed.Load() {
		return fmt.Errorf("subscribe: %w", events.ErrClosed)
	}
	prefixes := make([]string, len(filter.StreamPrefixes))
	for i, p := range filter.StreamPrefixes {
		prefixes[i] = likeEscaper.Replace(p) + "%"
	}
	types := filter.Types
	if types == nil {
		types = []string{}
	}
	var parts []int16 // nil: every partition
	if filter.Partitions != nil {
		parts = make([]int16, 0, filter.Partitions.Len())
		filter.Partitions.Each(func(p events.Partition) { parts = append(parts, int16(p)) })
	}
	poll := time.NewTicker(l.cfg.PollEvery)
	defer poll.Stop()
	last := clampPosition(from)
	buf := make([]events.Record, 0, subscribePage)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		wake := l.wake.wait()
		recs, next, err := l.page(ctx, buf[:0], last, prefixes, types, parts)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("subscribe after %d: %w", last, err)
		}
		if len(recs) > 0 || next > last {
			if err := fn(recs, position(next)); err != nil {
				return err
			}
		}
		clear(recs) // let the payloads go while waiting
		full := len(recs) == subscribePage
		last = next
		if full {
			continue
		}
		select {
		case <-wake:
		case <-poll.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-l.quit:
			return fmt.Errorf("subscribe after %d: %w", last, events.ErrClosed)
		}
	}
}

// likeEscaper escapes LIKE's wildcards (and its escape character) in a
// stream prefix.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// page reads up to subscribePage matching records after last into buf, and
// returns them with the position to continue from: the last record's when
// the page is full, else the head read in the same snapshot.
func (l *Log) page(ctx context.Context, buf []events.Record, last int64, prefixes, types []string, parts []int16) ([]events.Record, int64, error) {
	rows, err := l.pool.Query(ctx, l.q.page, last, prefixes, types, subscribePage, parts)
	if err != nil {
		return nil, last, l.translate(err)
	}
	defer rows.Close()
	head := last
	for rows.Next() {
		var (
			pos, rev    *int64
			stream, typ *string
			id          *[16]byte
			data, meta  []byte
			recorded    *time.Time
			part        *int16
		)
		if err := rows.Scan(&head, &pos, &stream, &rev, &id, &typ, &data, &meta, &recorded, &part); err != nil {
			return nil, last, l.translate(err)
		}
		if pos == nil {
			continue // nothing matched
		}
		buf = append(buf, events.Record{
			Stream: *stream, Revision: events.Revision(*rev), Position: position(*pos), ID: *id,
			Type: *typ, Data: data, Metadata: meta, Recorded: *recorded, Partition: events.Partition(*part),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, last, l.translate(err)
	}
	switch {
	case len(buf) == subscribePage:
		return buf, int64(buf[len(buf)-1].Position.Commit), nil
	case head < last:
		// A subscriber from a position beyond the head (another log's, or
		// one read before the database was reset) waits there.
		return buf, last, nil
	default:
		return buf, head, nil
	}
}
