package events

import (
	"errors"
	"fmt"
)

var (
	// ErrWrongRevision means an append's expected revision did not hold:
	// someone else wrote the stream. The writer is no longer its owner and
	// must stop. Returned wrapped in a *WrongRevisionError.
	ErrWrongRevision = errors.New("events: wrong expected revision")
	// ErrStreamNotFound means the stream has no events.
	ErrStreamNotFound = errors.New("events: stream not found")
	// ErrTooLarge means an event's data and metadata exceed the backend's cap.
	ErrTooLarge = errors.New("events: event too large")
	// ErrInvalid means a malformed call: an empty stream name, no events, an
	// event without an id or type.
	ErrInvalid = errors.New("events: invalid append")
	// ErrClosed means the log was closed.
	ErrClosed = errors.New("events: log closed")
)

// WrongRevisionError tells which expectation failed. It matches
// [ErrWrongRevision] with errors.Is.
type WrongRevisionError struct {
	Stream   string
	Expected ExpectedRevision
	// Actual is the stream's last revision; meaningless when !Exists.
	Actual Revision
	Exists bool
}

func (e *WrongRevisionError) Error() string {
	actual := "no stream"
	if e.Exists {
		actual = fmt.Sprintf("revision %d", uint64(e.Actual))
	}
	return fmt.Sprintf("events: wrong expected revision on %s: expected %s, stream is at %s", e.Stream, e.Expected, actual)
}

// Is makes errors.Is(err, ErrWrongRevision) hold.
func (e *WrongRevisionError) Is(target error) bool { return target == ErrWrongRevision }

// TooLargeError tells which event broke the cap. It matches [ErrTooLarge].
type TooLargeError struct {
	Stream string
	Index  int
	Size   int
	Max    int
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("events: event %d of append to %s is %d bytes, over the %d-byte cap", e.Index, e.Stream, e.Size, e.Max)
}

// Is makes errors.Is(err, ErrTooLarge) hold.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// CheckAppend validates an append's arguments against a size cap, as every
// backend must before writing: it returns an error wrapping [ErrInvalid] or
// a *[TooLargeError].
func CheckAppend(stream string, max int, evs []Event) error {
	if stream == "" {
		return fmt.Errorf("%w: empty stream name", ErrInvalid)
	}
	if len(evs) == 0 {
		return fmt.Errorf("%w: no events for %s", ErrInvalid, stream)
	}
	var zero [16]byte
	for i, ev := range evs {
		if ev.ID == zero {
			return fmt.Errorf("%w: event %d of %s has no id", ErrInvalid, i, stream)
		}
		if ev.Type == "" {
			return fmt.Errorf("%w: event %d of %s has no type", ErrInvalid, i, stream)
		}
		if !ev.Partition.Valid() {
			return fmt.Errorf("%w: event %d of %s has partition %d, beyond %d", ErrInvalid, i, stream, ev.Partition, Partitions)
		}
		if n := len(ev.Data) + len(ev.Metadata); max > 0 && n > max {
			return &TooLargeError{Stream: stream, Index: i, Size: n, Max: max}
		}
	}
	return nil
}
