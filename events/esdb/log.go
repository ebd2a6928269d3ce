package esdb

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/hookline/hookline/events"
)

// Log is an [events.Log] on EventStoreDB/KurrentDB. It is safe for
// concurrent use; create it with [Open]; the zero value is not usable.
type Log struct {
	client *kurrentdb.Client
	cfg    Config
	log    *slog.Logger
	closed atomic.Bool
}

var _ events.Log = (*Log)(nil)

// Open connects to the server that cfg names and checks that it answers.
// The caller owns the Log and must Close it.
func Open(ctx context.Context, cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	conf, err := kurrentdb.ParseConnectionString(cfg.ConnectionString)
	if err != nil {
		return nil, fmt.Errorf("esdb: parse connection string: %w", err)
	}
	conf.Logger = clientLogger(cfg.Logger)
	client, err := kurrentdb.NewClient(conf)
	if err != nil {
		return nil, fmt.Errorf("esdb: new client: %w", err)
	}
	l := &Log{client: client, cfg: cfg, log: cfg.Logger}
	if _, err := l.Head(ctx); err != nil {
		_ = client.Close()
		return nil, fmt.Errorf("esdb: open %s: %w", redact(cfg.ConnectionString), err)
	}
	return l, nil
}

// Close closes the client. Calls after Close (Close too), and
// subscriptions running at the time, fail with [events.ErrClosed].
func (l *Log) Close() error {
	if l.closed.Swap(true) {
		return fmt.Errorf("close: %w", events.ErrClosed)
	}
	return l.client.Close()
}

// Append implements [events.Log]. Creating an expiring stream (expected
// NoStream or Any on an event or delivery stream) first sets the stream's
// $maxAge; see the package documentation.
func (l *Log) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	if l.closed.Load() {
		return events.AppendResult{}, fmt.Errorf("append %s: %w", stream, events.ErrClosed)
	}
	if err := events.CheckAppend(stream, l.cfg.MaxEventSize, evs); err != nil {
		return events.AppendResult{}, err
	}
	if expected == nil {
		return events.AppendResult{}, fmt.Errorf("%w: nil expected revision for %s", events.ErrInvalid, stream)
	}
	if creates(expected) && events.Expires(stream) {
		if err := l.setRetention(ctx, stream); err != nil {
			return events.AppendResult{}, err
		}
	}
	data := make([]kurrentdb.EventData, len(evs))
	for i, ev := range evs {
		data[i] = kurrentdb.EventData{
			EventID:     ev.ID,
			EventType:   ev.Type,
			ContentType: kurrentdb.ContentTypeBinary,
			Data:        ev.Data,
			Metadata:    withPartition(ev.Metadata, ev.Partition),
		}
	}
	res, err := l.client.AppendToStream(ctx, stream, kurrentdb.AppendToStreamOptions{StreamState: streamState(expected)}, data...)
	if err != nil {
		terr := translate("append", stream, expected, err)
		var wrong *events.WrongRevisionError
		if errors.As(terr, &wrong) && !reportsActual(err) {
			l.fillActual(ctx, wrong)
		}
		return events.AppendResult{}, terr
	}
	out := events.AppendResult{
		Revision: events.Revision(res.NextExpectedVersion),
		Position: events.Position{Commit: res.CommitPosition, Prepare: res.PreparePosition},
	}
	// The server answers without a position when the append was idempotent
	// (the events were already there), and the position it gives for a
	// multi-event append is that of the write, not necessarily that of its
	// last event: read the last event back for its own position.
	if out.Position.IsStart() || len(evs) > 1 {
		if pos, ok := l.positionOf(ctx, stream, out.Revision); ok {
			out.Position = pos
		}
	}
	return out, nil
}

// creates reports whether an append with this expectation may create its
// stream.
func creates(expected events.ExpectedRevision) bool {
	switch expected.(type) {
	case events.NoStream, events.Any:
		return true
	}
	return false
}

// streamState maps an expectation to the client's.
func streamState(expected events.ExpectedRevision) kurrentdb.StreamState {
	switch e := expected.(type) {
	case events.NoStream:
		return kurrentdb.NoStream{}
	case events.StreamExists:
		return kurrentdb.StreamExists{}
	case events.Exact:
		return kurrentdb.Revision(uint64(e))
	}
	return kurrentdb.Any{}
}

// reportsActual reports whether a client's wrong-expected-version error
// tells the stream's actual revision.
func reportsActual(err error) bool {
	var kerr *kurrentdb.Error
	if !errors.As(err, &kerr) {
		return false
	}
	_, _, ok := actualRevision(kerr)
	return ok
}

// fillActual completes a wrong-revision error whose cause did not tell the
// stream's state, by reading the stream's last event. It is best effort: the
// error stays a WrongRevisionError whatever happens here.
func (l *Log) fillActual(ctx context.Context, wrong *events.WrongRevisionError) {
	recs, err := l.ReadStream(ctx, wrong.Stream, events.Backwards, events.End, 1)
	if err != nil || len(recs) == 0 {
		return
	}
	wrong.Actual, wrong.Exists = recs[0].Revision, true
}

// positionOf returns the position of the event at rev in stream.
func (l *Log) positionOf(ctx context.Context, stream string, rev events.Revision) (events.Position, bool) {
	recs, err := l.ReadStream(ctx, stream, events.Forwards, rev, 1)
	if err != nil || len(recs) == 0 || recs[0].Revision != rev || !known(recs[0].Position) {
		return events.Position{}, false
	}
	return recs[0].Position, true
}

// known reports whether the server gave a position: servers before 22.10
// send none on stream reads, which the client shows as MaxUint64.
func known(p events.Position) bool { return p.Commit != math.MaxUint64 && p.Prepare != math.MaxUint64 }

// ReadStream implements [events.Log].
func (l *Log) ReadStream(ctx context.Context, stream string, dir events.Direction, from events.Revision, max int) ([]events.Record, error) {
	if l.closed.Load() {
		return nil, fmt.Errorf("read %s: %w", stream, events.ErrClosed)
	}
	if stream == "" {
		return nil, fmt.Errorf("%w: empty stream name", events.ErrInvalid)
	}
	if max <= 0 {
		return nil, nil
	}
	opts := kurrentdb.ReadStreamOptions{Direction: kurrentdb.Forwards, From: kurrentdb.Revision(uint64(from))}
	if dir == events.Backwards {
		opts.Direction = kurrentdb.Backwards
	}
	if from == events.End {
		opts.From = kurrentdb.End{}
	}
	rs, err := l.client.ReadStream(ctx, stream, opts, uint64(max))
	if err != nil {
		return nil, translate("read", stream, nil, err)
	}
	defer rs.Close()
	var out []events.Record
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, translate("read", stream, nil, err)
		}
		out = append(out, record(ev))
	}
	// Reading backwards from a revision past the end, the server starts at
	// the last event; the contract says a start past the end returns nothing.
	if dir == events.Backwards && from != events.End && len(out) > 0 && out[0].Revision < from {
		return nil, nil
	}
	return out, nil
}

// readAllPage is how many events ReadAll asks for at a time at most.
const readAllPage = 512

// ReadAll implements [events.Log]. System events (the server's own and the
// projections', in $-streams or with $-types) are not part of Hookline's
// log and are skipped.
func (l *Log) ReadAll(ctx context.Context, from events.Position, max int) ([]events.Record, error) {
	if l.closed.Load() {
		return nil, fmt.Errorf("read $all: %w", events.ErrClosed)
	}
	if max <= 0 {
		return nil, nil
	}
	var out []events.Record
	pos := from
	for len(out) < max {
		// One more than needed, for the event at from that the server
		// returns first (its reads start at a position, included).
		page := min(max-len(out)+1, readAllPage)
		n, err := l.readAllPage(ctx, &pos, page, func(r events.Record) bool {
			out = append(out, r)
			return len(out) < max
		})
		if err != nil {
			return nil, err
		}
		if n < page {
			break // the end of the log
		}
	}
	return out, nil
}

// readAllPage reads up to page events forwards from *pos, advances *pos past
// each event received and hands the non-system ones after the starting
// position to keep, until keep returns false. It returns how many events the
// server sent.
func (l *Log) readAllPage(ctx context.Context, pos *events.Position, page int, keep func(events.Record) bool) (int, error) {
	rs, err := l.client.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Forwards, From: allPosition(*pos)}, uint64(page))
	if err != nil {
		return 0, translate("read", "$all", nil, err)
	}
	defer rs.Close()
	n := 0
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, translate("read", "$all", nil, err)
		}
		n++
		r := record(ev)
		if !pos.Less(r.Position) {
			continue // the event at the start position itself
		}
		*pos = r.Position
		if system(r.Stream, r.Type) {
			continue
		}
		if !keep(r) {
			return n, nil
		}
	}
}

// headPage is how many events Head reads backwards at a time while it
// skips system events.
const headPage = 256

// Head implements [events.Log]: the position of the last non-system event.
// System events are skipped because no subscriber ever receives them, so a
// Head at one of them could never be "seen".
func (l *Log) Head(ctx context.Context) (events.Position, error) {
	if l.closed.Load() {
		return events.Position{}, fmt.Errorf("head: %w", events.ErrClosed)
	}
	var from kurrentdb.AllPosition = kurrentdb.End{}
	var before *events.Position // set after the first page
	for {
		rs, err := l.client.ReadAll(ctx, kurrentdb.ReadAllOptions{Direction: kurrentdb.Backwards, From: from}, headPage)
		if err != nil {
			return events.Position{}, translate("head", "", nil, err)
		}
		pos, n, found, err := headOf(rs, before)
		rs.Close()
		if err != nil || found {
			return pos, err
		}
		if n < headPage {
			return events.Start, nil
		}
		before = &pos
		from = kurrentdb.Position{Commit: pos.Commit, Prepare: pos.Prepare}
	}
}

// headOf scans one backwards page for the first non-system event strictly
// before *before (when set: whether the server includes the start of a
// backwards read or not, it is not counted twice). It returns that event's
// position and found, or the position of the oldest event of the page and
// how many events the page held.
func headOf(rs *kurrentdb.ReadStream, before *events.Position) (pos events.Position, n int, found bool, err error) {
	for {
		ev, err := rs.Recv()
		if errors.Is(err, io.EOF) {
			return pos, n, false, nil
		}
		if err != nil {
			return events.Position{}, n, false, translate("head", "", nil, err)
		}
		n++
		r := record(ev)
		if before != nil && !r.Position.Less(*before) {
			continue
		}
		if !system(r.Stream, r.Type) {
			return r.Position, n, true, nil
		}
		pos = r.Position
	}
}

// allPosition maps a position of the log to the client's.
func allPosition(p events.Position) kurrentdb.AllPosition {
	if p.IsStart() {
		return kurrentdb.Start{}
	}
	return kurrentdb.Position{Commit: p.Commit, Prepare: p.Prepare}
}

// record converts an event read from the server.
func record(ev *kurrentdb.ResolvedEvent) events.Record {
	e := ev.OriginalEvent()
	meta, part := splitPartition(e.UserMetadata)
	return events.Record{
		Partition: part,
		Stream:    e.StreamID,
		Revision:  events.Revision(e.EventNumber),
		Position:  events.Position{Commit: e.Position.Commit, Prepare: e.Position.Prepare},
		ID:        e.EventID,
		Type:      e.EventType,
		Data:      e.Data,
		Metadata:  meta,
		Recorded:  e.CreatedDate,
	}
}

// system reports whether an event is the server's or the projections' own:
// its stream or its type starts with '$'.
func system(stream, typ string) bool {
	return strings.HasPrefix(stream, "$") || strings.HasPrefix(typ, "$")
}

// redact drops the user information of a connection string, for messages.
func redact(cs string) string {
	scheme, rest, ok := strings.Cut(cs, "://")
	if !ok {
		return "<connection string>"
	}
	if _, host, ok := strings.Cut(rest, "@"); ok {
		rest = host
	}
	if host, _, ok := strings.Cut(rest, "?"); ok {
		rest = host
	}
	return scheme + "://" + rest
}

// clientLogger sends the client library's messages to log at debug level:
// the client reports as errors things that are routine here (a
// subscription cancelled on purpose), and this package logs what matters.
func clientLogger(log *slog.Logger) kurrentdb.LoggingFunc {
	return func(level kurrentdb.LogLevel, format string, args ...any) {
		if !log.Enabled(context.Background(), slog.LevelDebug) {
			return
		}
		log.Debug("kurrentdb client", "client_level", level, "detail", fmt.Sprintf(format, args...))
	}
}
