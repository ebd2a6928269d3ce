package esdb

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/events"
)

// translate turns an error of the client into the events package's
// sentinels; it is the one place that reads the client's error codes. op
// names the operation ("append", "read", ...), stream its target ("" for
// $all), expected the append's expectation (nil for other operations).
//
// It uses errors.As, because the client wraps its *kurrentdb.Error in
// fmt.Errorf on several paths ("could not construct append operation.
// Reason: %w") where its own kurrentdb.FromError, a type assertion, would
// call them "unknown".
func translate(op, stream string, expected events.ExpectedRevision, err error) error {
	if err == nil {
		return nil
	}
	where := op
	if stream != "" {
		where = op + " " + stream
	}
	var kerr *kurrentdb.Error
	if !errors.As(err, &kerr) {
		return fmt.Errorf("%s: %w", where, err)
	}
	switch kerr.Code() {
	case kurrentdb.ErrorCodeWrongExpectedVersion, kurrentdb.ErrorCodeStreamRevisionConflict:
		actual, exists, _ := actualRevision(kerr)
		if expected == nil {
			expected = events.Any{}
		}
		return &events.WrongRevisionError{Stream: stream, Expected: expected, Actual: actual, Exists: exists}
	case kurrentdb.ErrorCodeResourceNotFound:
		return fmt.Errorf("%s: %w", where, events.ErrStreamNotFound)
	case kurrentdb.ErrorCodeStreamDeleted, kurrentdb.ErrorCodeStreamTombstoned:
		return fmt.Errorf("%s: stream deleted: %w", where, events.ErrStreamNotFound)
	case kurrentdb.ErrorCodeAppendRecordSizeExceeded, kurrentdb.ErrorCodeAppendTransactionSizeExceeded:
		return fmt.Errorf("%s: %w: %w", where, events.ErrTooLarge, err)
	case kurrentdb.ErrorCodeConnectionClosed:
		return fmt.Errorf("%s: %w", where, events.ErrClosed)
	}
	if maxAppendSizeExceeded(kerr) {
		return fmt.Errorf("%s: %w: %w", where, events.ErrTooLarge, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// wrongVersion matches the message that the client builds from the server's
// WrongExpectedVersion answer to a v1 append:
// "wrong expected version: expecting '<expected>' but got '<current>'",
// current being a revision or "no_stream". The client keeps the current
// revision only in this text.
var wrongVersion = regexp.MustCompile(`but got '([^']*)'`)

// actualRevision returns the stream's revision that a wrong-expected-version
// error reports; ok is false when the error does not say.
func actualRevision(kerr *kurrentdb.Error) (actual events.Revision, exists, ok bool) {
	var conflict *kurrentdb.StreamRevisionConflictError
	if errors.As(kerr.Err(), &conflict) {
		switch s := conflict.ActualRevision.(type) {
		case kurrentdb.NoStream:
			return 0, false, true
		case kurrentdb.StreamRevision:
			return events.Revision(s.Value), true, true
		}
		return 0, false, false
	}
	if kerr.Err() == nil {
		return 0, false, false
	}
	m := wrongVersion.FindStringSubmatch(kerr.Err().Error())
	if m == nil {
		return 0, false, false
	}
	if m[1] == "no_stream" {
		return 0, false, true
	}
	n, err := strconv.ParseUint(m[1], 10, 64)
	if err != nil {
		return 0, false, false
	}
	return events.Revision(n), true, true
}

// maxAppendSizeExceeded reports whether the server refused an append for its
// size on the v1 append path: it answers InvalidArgument, "Maximum Append
// Size of N Exceeded." (or "... exceeds Maximum Append Event Size of N." on
// newer servers), which the client files under an unknown code.
func maxAppendSizeExceeded(kerr *kurrentdb.Error) bool {
	if kerr.Err() == nil {
		return false
	}
	st, ok := status.FromError(kerr.Err())
	if !ok || st.Code() != codes.InvalidArgument {
		return false
	}
	return strings.Contains(strings.ToLower(st.Message()), "maximum append")
}
