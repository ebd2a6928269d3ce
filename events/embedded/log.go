package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/hookline/hookline/events"
)

var _ events.Log = (*Log)(nil)

// Log is the events.Log on Pebble. It is safe for concurrent use; the zero
// value is not usable: get one from [Open].
type Log struct {
	cfg Config
	log *slog.Logger
	db  *pebble.DB

	// mu guards closed. Every use of db outside the writer goroutine holds
	// it shared, so Close, which takes it exclusively, never closes db under
	// a reader (Pebble panics on a closed DB).
	mu     sync.RWMutex
	closed bool

	vaultMu sync.Mutex // serialises the vault's files (vault.go)

	appends    chan *appendReq // to the writer; unbuffered, see write
	jobs       chan *job       // to the writer: retention deletes
	quit       chan struct{}   // closed by Close
	writerDone chan struct{}   // closed when the writer goroutine ends

	// seq is the last sequence number assigned; owned by the writer, read
	// atomically elsewhere. The writer stores it only once the group's
	// batch is synced, so it is also the last durable record: Pebble makes
	// a batch visible to readers before its write-ahead log is synced, and
	// every read of the log stops at seq, so that no reader (a projection
	// that checkpoints what it applied, above all) acts on a record that a
	// power cut could take back and whose position a later append reuses.
	seq atomic.Uint64

	// notifyMu guards notify, a channel closed and replaced after every
	// commit: subscribers wait on it instead of polling.
	notifyMu sync.Mutex
	notify   chan struct{}

	stats writerStats
	heads *headCache // owned by the writer goroutine
}

// Open opens (or creates) the log in cfg.Dir, and starts its writer. The
// caller must Close it.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	opts := &pebble.Options{
		FS:                 cfg.FS,
		FormatMajorVersion: pebble.FormatNewest,
		Logger:             pebbleLogger{cfg.Logger},
		// Larger than Pebble's 4 MiB default, so that flushes keep up with
		// group commits of many 2 KB events instead of stalling them.
		MemTableSize: 64 << 20,
	}
	// Payloads are mostly text: Zstd where data settles (the two bottom
	// levels) keeps them about a quarter smaller than Snappy, which stays
	// on the upper levels, rewritten often. Bloom filters spare the disk
	// the lookups of streams that do not exist (every new stream's first
	// append asks for its head).
	opts.ApplyCompressionSettings(func() pebble.DBCompressionSettings { return pebble.DBCompressionBalanced })
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cfg.Dir, err)
	}
	l := &Log{
		cfg:        cfg,
		log:        cfg.Logger,
		db:         db,
		appends:    make(chan *appendReq),
		heads:      newHeadCache(),
		jobs:       make(chan *job),
		quit:       make(chan struct{}),
		writerDone: make(chan struct{}),
		notify:     make(chan struct{}),
	}
	seq, err := l.recoverSeq()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", cfg.Dir, err), db.Close())
	}
	if err := l.migrateVault(); err != nil {
		return nil, errors.Join(fmt.Errorf("open %s: %w", cfg.VaultDir, err), db.Close())
	}
	l.seq.Store(seq)
	go l.write()
	l.log.Debug("events log opened", slog.String("dir", cfg.Dir), slog.Uint64("seq", seq))
	return l, nil
}

// recoverSeq returns the last sequence number ever assigned: the greater of
// the recorded one and the last key of the log. Both are written in the same
// atomic batch as the events, so after a crash they agree with what survived.
func (l *Log) recoverSeq() (uint64, error) {
	var seq uint64
	v, closer, err := l.db.Get(keyLastSeq)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
	case err != nil:
		return 0, err
	default:
		if len(v) != 8 {
			closer.Close()
			return 0, fmt.Errorf("%w: last seq of %d bytes", errCorrupt, len(v))
		}
		seq = beUint64(v)
		closer.Close()
	}
	last, err := l.lastLogSeq(logUpper)
	if err != nil {
		return 0, err
	}
	return max(seq, last), nil
}

// lastLogSeq returns the sequence number of the last record before the
// key upper (0 when none).
func (l *Log) lastLogSeq(upper []byte) (uint64, error) {
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: logKey(0), UpperBound: upper})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	if !it.Last() {
		return 0, it.Error()
	}
	return seqOfLogKey(it.Key())
}

// use runs fn with the store open, or fails with events.ErrClosed.
func (l *Log) use(fn func() error) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return events.ErrClosed
	}
	return fn()
}

// Close stops the writer and closes the store. In-flight appends finish;
// later calls fail with events.ErrClosed, and so does a second Close.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return events.ErrClosed
	}
	l.closed = true
	close(l.quit)
	l.mu.Unlock()
	<-l.writerDone
	// Flush the memtables: what the write-ahead log holds goes into
	// compressed tables, so a stopped node keeps no log files the size of
	// its memtables and a restart has nothing to replay.
	if err := l.db.Flush(); err != nil {
		l.cfg.Logger.Warn("embedded log: flush at close failed; the write-ahead log keeps the data", slog.Any("error", err))
	}
	if err := l.db.Close(); err != nil {
		return fmt.Errorf("close %s: %w", l.cfg.Dir, err)
	}
	return nil
}

// Head returns the position of the last durable event in the log.
func (l *Log) Head(ctx context.Context) (events.Position, error) {
	if err := ctx.Err(); err != nil {
		return events.Position{}, err
	}
	var seq uint64
	err := l.use(func() (err error) {
		seq, err = l.lastLogSeq(logKey(l.seq.Load() + 1))
		return err
	})
	if err != nil {
		return events.Position{}, fmt.Errorf("head: %w", err)
	}
	return position(seq), nil
}

// ReadStream reads at most max events of stream from revision from (included)
// in direction dir. Backwards from any revision past the end (End included)
// starts at the last event.
func (l *Log) ReadStream(ctx context.Context, stream string, dir events.Direction, from events.Revision, max int) ([]events.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("read %s: %w: max %d", stream, events.ErrInvalid, max)
	}
	var recs []events.Record
	err := l.use(func() error {
		durable := l.seq.Load() // before the snapshot, which holds at least that
		snap := l.db.NewSnapshot()
		defer snap.Close()
		// The stream's index is read without its head first: a stream
		// with events in range needs no more, and only an empty answer
		// asks whether the stream exists at all.
		opts := &pebble.IterOptions{LowerBound: indexKey(stream, from), UpperBound: indexUpper(stream)}
		if dir == events.Backwards {
			opts = &pebble.IterOptions{LowerBound: indexKey(stream, 0), UpperBound: indexUpper(stream)}
			if from != events.End {
				opts.UpperBound = indexKey(stream, from+1)
			}
		}
		it, err := snap.NewIter(opts)
		if err != nil {
			return err
		}
		defer it.Close()
		valid, step := it.First, it.Next
		if dir == events.Backwards {
			valid, step = it.Last, it.Prev
		}
		unsynced := false // the stream has records not yet durable
		for ok := valid(); ok && len(recs) < max; ok = step() {
			e, err := decodeIndex(it.Value())
			if err != nil {
				return err
			}
			if e.seq > durable {
				unsynced = true
				continue
			}
			r, err := getRecord(snap, e.seq)
			if err != nil {
				return err
			}
			recs = append(recs, r)
		}
		if err := it.Error(); err != nil || len(recs) > 0 {
			return err
		}
		if _, ok, err := readHead(snap, stream); err != nil {
			return err
		} else if !ok || unsynced && !durableStart(snap, stream, durable) {
			return events.ErrStreamNotFound
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stream, err)
	}
	return recs, nil
}

// ReadAll reads at most max events of the log after from, in position order.
// Retention leaves gaps in the positions; they are skipped.
func (l *Log) ReadAll(ctx context.Context, from events.Position, max int) ([]events.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if max <= 0 {
		return nil, fmt.Errorf("read all: %w: max %d", events.ErrInvalid, max)
	}
	recs, _, err := l.scan(from.Commit, max, events.Filter{}, nil)
	if err != nil {
		return nil, fmt.Errorf("read all from %s: %w", from, err)
	}
	return recs, nil
}

// durableStart reports whether stream's first record (the first that
// retention left) is durable, that is whether the stream exists for
// readers.
func durableStart(snap *pebble.Snapshot, stream string, durable uint64) bool {
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: indexKey(stream, 0), UpperBound: indexUpper(stream)})
	if err != nil {
		return true
	}
	defer it.Close()
	if !it.First() {
		return true
	}
	e, err := decodeIndex(it.Value())
	return err != nil || e.seq <= durable
}

// scan reads the durable log after seq: up to max records, keeping those
// that pass filter (appended to buf). It returns the records and the last
// sequence number it looked at (seq when there was nothing after it).
func (l *Log) scan(seq uint64, max int, filter events.Filter, buf []events.Record) ([]events.Record, uint64, error) {
	last := seq
	err := l.use(func() error {
		durable := l.seq.Load()
		if seq >= durable {
			return nil
		}
		it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: logKey(seq + 1), UpperBound: logKey(durable + 1)})
		if err != nil {
			return err
		}
		defer it.Close()
		for ok, n := it.First(), 0; ok && n < max; ok, n = it.Next(), n+1 {
			s, err := seqOfLogKey(it.Key())
			if err != nil {
				return err
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return err
			}
			last = s
			if !filter.IsZero() && !matchEncoded(filter, v) {
				continue
			}
			r, err := decodeRecord(s, v)
			if err != nil {
				return err
			}
			buf = append(buf, r)
		}
		return it.Error()
	})
	return buf, last, err
}

// matchEncoded applies filter to an encoded record without copying its data.
func matchEncoded(filter events.Filter, v []byte) bool {
	p, stream, typ, ok := peekRecord(v)
	return !ok || filter.MatchPartition(p) && filter.MatchStream(string(stream)) && filter.MatchType(string(typ))
}

// reader is what reads need of a DB, a snapshot or an indexed batch.
type reader interface {
	Get(key []byte) ([]byte, io.Closer, error)
}

// readHead returns stream's head, ok=false when the stream does not exist.
func readHead(r reader, stream string) (head, bool, error) {
	v, closer, err := r.Get(headKey(stream))
	if errors.Is(err, pebble.ErrNotFound) {
		return head{}, false, nil
	}
	if err != nil {
		return head{}, false, err
	}
	defer closer.Close()
	h, err := decodeHead(v)
	return h, err == nil, err
}

// readIndex returns the index entry of stream at rev.
func readIndex(r reader, stream string, rev events.Revision) (indexEntry, error) {
	v, closer, err := r.Get(indexKey(stream, rev))
	if err != nil {
		return indexEntry{}, err
	}
	defer closer.Close()
	return decodeIndex(v)
}

func getRecord(r reader, seq uint64) (events.Record, error) {
	v, closer, err := r.Get(logKey(seq))
	if err != nil {
		return events.Record{}, fmt.Errorf("record %d: %w", seq, err)
	}
	defer closer.Close()
	return decodeRecord(seq, v)
}

func position(seq uint64) events.Position { return events.Position{Commit: seq, Prepare: seq} }

// pebbleLogger sends Pebble's messages to slog.
type pebbleLogger struct{ log *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.log.Debug("pebble", slog.String("detail", fmt.Sprintf(format, args...)))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.log.Error("pebble", slog.String("detail", fmt.Sprintf(format, args...)))
}

// Fatalf must not return: Pebble calls it when going on could lose data (a
// failed WAL sync). Like Pebble's own default logger, it exits the process.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	p.log.Error("pebble fatal", slog.String("detail", fmt.Sprintf(format, args...)))
	os.Exit(1)
}
