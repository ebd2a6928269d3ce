package events

import "context"

// DefaultMaxEventSize is the default cap on one event's data plus metadata.
// It leaves room for a 256 KiB payload and its envelope.
const DefaultMaxEventSize = 1 << 20

// Log is the durable, ordered event log that every part of Hookline shares.
// Implementations are safe for concurrent use.
type Log interface {
	// Append writes evs to the end of stream, atomically: all of them or
	// none. It returns once the events are durable. expected must hold, or
	// the append fails with [ErrWrongRevision] (as a *[WrongRevisionError]).
	// Appending again events with the same ids at the same place succeeds
	// without writing, and returns the original result. An event whose data
	// and metadata exceed the backend's cap fails with [ErrTooLarge].
	Append(ctx context.Context, stream string, expected ExpectedRevision, evs ...Event) (AppendResult, error)

	// ReadStream reads at most max events of stream starting at from (included)
	// in the given direction. Reading backwards from [End] starts at the last
	// event. A stream that does not exist fails with [ErrStreamNotFound]; a
	// start past the end returns no records.
	ReadStream(ctx context.Context, stream string, dir Direction, from Revision, max int) ([]Record, error)

	// ReadAll reads at most max events of the whole log after from (excluded),
	// in position order.
	ReadAll(ctx context.Context, from Position, max int) ([]Record, error)

	// Subscribe calls fn with the events of the whole log after from
	// (excluded) that pass filter, in position order, in batches: first the
	// events already in the log (catch-up), then new ones as they are
	// appended (live). No event is skipped or repeated. Each call also
	// says how far the log has been read: every event at or before through
	// that passes the filter has been handed over, in this call or an
	// earlier one; a call may carry no records when only through moved (the
	// events read did not pass the filter), so that a subscriber with a
	// selective filter still learns that it is caught up. fn must not
	// retain the slice. Subscribe returns when ctx ends (with ctx.Err()),
	// when fn returns an error (with that error) or when the log fails or
	// closes. To resume, subscribe again from the last through seen.
	Subscribe(ctx context.Context, from Position, filter Filter, fn SubscribeFunc) error

	// Head returns the position of the last event in the log ([Start] when
	// it is empty). A subscriber that has seen Head has seen every event
	// acknowledged before Head was called.
	Head(ctx context.Context) (Position, error)

	// Close releases the log. Calls after Close fail with [ErrClosed].
	Close() error
}

// SubscribeFunc receives a subscription's batches: recs, the events that
// passed the filter, and through, the position up to which the log has been
// read (at least the position of the last of recs). See [Log.Subscribe].
type SubscribeFunc func(recs []Record, through Position) error
