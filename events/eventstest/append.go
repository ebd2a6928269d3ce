package eventstest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
)

// testRoundTrip: what is appended is read back as it was, stamped with a
// revision, a position and the time it was recorded.
func testRoundTrip(e *env) {
	stream := e.stream("s")
	ev := events.Event{ID: uuid.New(), Type: "Thing" + randomHex(2), Data: []byte{0, 1, 2, 255, 'x'}, Metadata: []byte(`{"content_type":"application/protobuf"}`)}
	empty := events.Event{ID: uuid.New(), Type: "Empty"}
	before := time.Now()
	res := e.mustAppend(stream, events.NoStream{}, ev)
	res2 := e.mustAppend(stream, events.Exact(0), empty)
	after := time.Now()
	if res.Revision != 0 || res2.Revision != 1 {
		e.Errorf("revisions = %d, %d; want 0, 1", res.Revision, res2.Revision)
	}
	if res.Position.IsStart() || !res.Position.Less(res2.Position) {
		e.Errorf("positions %s then %s: want after Start and increasing", res.Position, res2.Position)
	}
	recs := e.checkStream(stream, []events.Event{ev, empty})
	if recs[0].Position != res.Position || recs[1].Position != res2.Position {
		e.Errorf("read positions %s, %s; append said %s, %s", recs[0].Position, recs[1].Position, res.Position, res2.Position)
	}
	// Recorded comes from the backend's clock: allow for skew with a server.
	const skew = time.Minute
	for _, r := range recs {
		if r.Recorded.Before(before.Add(-skew)) || r.Recorded.After(after.Add(skew)) {
			e.Errorf("recorded %s, want between %s and %s (±%s)", r.Recorded, before, after, skew)
		}
	}
}

// testAppendAtomic: several events land together, at consecutive revisions;
// an append that fails writes none of its events.
func testAppendAtomic(e *env) {
	stream := e.stream("s")
	evs := newEvents(3, "Multi")
	res := e.mustAppend(stream, events.NoStream{}, evs...)
	if res.Revision != 2 {
		e.Errorf("append of 3 to a new stream: revision %d, want 2", res.Revision)
	}
	recs := e.checkStream(stream, evs)
	if recs[2].Position != res.Position {
		e.Errorf("append returned position %s, last event is at %s", res.Position, recs[2].Position)
	}

	_, err := e.log.Append(e.ctx, stream, events.Exact(0), newEvents(2, "Multi")...)
	e.wantWrongRevision(err, stream, 2, true)
	big := newEvent("Multi")
	big.Data = make([]byte, e.h.MaxEventSize+1)
	_, err = e.log.Append(e.ctx, stream, events.Exact(2), newEvent("Multi"), big)
	if !errors.Is(err, events.ErrTooLarge) {
		e.Errorf("append with an oversized second event: err = %v, want ErrTooLarge", err)
	}
	e.checkStream(stream, evs)
}

// testExpectedRevision: each expectation, holding and failing.
func testExpectedRevision(e *env) {
	cases := []struct {
		name     string
		existing int // events already in the stream
		expected events.ExpectedRevision
		ok       bool
	}{
		{"AnyNew", 0, events.Any{}, true},
		{"AnyExisting", 2, events.Any{}, true},
		{"NoStreamNew", 0, events.NoStream{}, true},
		{"NoStreamExisting", 1, events.NoStream{}, false},
		{"StreamExistsNew", 0, events.StreamExists{}, false},
		{"StreamExistsExisting", 2, events.StreamExists{}, true},
		{"ExactRight", 3, events.Exact(2), true},
		{"ExactZero", 1, events.Exact(0), true},
		{"ExactBehind", 3, events.Exact(1), false},
		{"ExactAhead", 2, events.Exact(5), false},
		{"ExactNew", 0, events.Exact(0), false},
	}
	for _, c := range cases {
		e.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := e.sub(t, c.name)
			stream, existing := e.streamWith(c.existing, "Before")
			ev := newEvent("Tried")
			res, err := e.log.Append(e.ctx, stream, c.expected, ev)
			if !c.ok {
				e.wantWrongRevision(err, stream, events.Revision(c.existing-1), c.existing > 0)
				if c.existing > 0 {
					e.checkStream(stream, existing)
				} else if _, err := e.log.ReadStream(e.ctx, stream, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
					e.Errorf("read after a failed append to a new stream: err = %v, want ErrStreamNotFound", err)
				}
				return
			}
			if err != nil {
				e.Fatalf("append expecting %s to a stream of %d: %v", c.expected, c.existing, err)
			}
			if res.Revision != events.Revision(c.existing) {
				e.Errorf("revision %d, want %d", res.Revision, c.existing)
			}
			e.checkStream(stream, append(existing, ev))
		})
	}
	// The error names the stream and both sides, for the logs.
	e.Run("Message", func(t *testing.T) {
		t.Parallel()
		e := e.sub(t, "Message")
		stream := e.stream("s")
		e.mustAppend(stream, events.NoStream{}, newEvents(2, "Before")...)
		_, err := e.log.Append(e.ctx, stream, events.Exact(7), newEvent("Tried"))
		e.wantWrongRevision(err, stream, 1, true)
		if msg := err.Error(); !strings.Contains(msg, stream) || !strings.Contains(msg, "7") {
			e.Errorf("error %q should name the stream and the expected revision", msg)
		}
	})
}

// testIdempotent: appending the same event ids at the same place again
// succeeds with the original result and writes nothing.
func testIdempotent(e *env) {
	cases := []struct {
		name   string
		before int
		first  func(last events.Revision) events.ExpectedRevision
	}{
		{"NoStream", 0, func(events.Revision) events.ExpectedRevision { return events.NoStream{} }},
		{"Exact", 2, func(last events.Revision) events.ExpectedRevision { return events.Exact(last) }},
		{"Any", 1, func(events.Revision) events.ExpectedRevision { return events.Any{} }},
		{"StreamExists", 1, func(events.Revision) events.ExpectedRevision { return events.StreamExists{} }},
	}
	for _, c := range cases {
		e.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := e.sub(t, c.name)
			stream, want := e.streamWith(c.before, "Before")
			evs := newEvents(2, "Again")
			expected := c.first(events.Revision(c.before - 1))
			first := e.mustAppend(stream, expected, evs...)
			again, err := e.log.Append(e.ctx, stream, expected, evs...)
			if err != nil {
				e.Fatalf("re-append of the same ids expecting %s: %v", expected, err)
			}
			if again != first {
				e.Errorf("re-append returned %+v, want the original %+v", again, first)
			}
			e.checkStream(stream, append(want, evs...))
		})
	}
}

// testConcurrentExact: appenders racing on one stream with Exact: for each
// revision exactly one wins, the others get ErrWrongRevision.
func testConcurrentExact(e *env) {
	const writers, rounds = 8, 10
	stream := e.stream("s")
	var winners []events.Event
	for round := range rounds {
		expected := events.ExpectAfter(events.Revision(round-1), round > 0)
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			mu    sync.Mutex // guards won, errs
			won   []events.Event
			errs  []error
		)
		for range writers {
			ev := newEvent("Race")
			wg.Go(func() {
				<-start
				_, err := e.log.Append(e.ctx, stream, expected, ev)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, ev)
				case !errors.Is(err, events.ErrWrongRevision):
					errs = append(errs, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(errs) > 0 {
			e.Fatalf("round %d: unexpected errors: %v", round, errors.Join(errs...))
		}
		if len(won) != 1 {
			e.Fatalf("round %d expecting %s: %d appenders won, want exactly 1", round, expected, len(won))
		}
		winners = append(winners, won[0])
	}
	e.checkStream(stream, winners)
}

// testInvalid: malformed appends fail with ErrInvalid and write nothing.
func testInvalid(e *env) {
	stream := e.stream("s")
	noID := newEvent("X")
	noID.ID = uuid.Nil
	noType := newEvent("")
	cases := []struct {
		name   string
		stream string
		evs    []events.Event
	}{
		{"EmptyStream", "", newEvents(1, "X")},
		{"NoEvents", stream, nil},
		{"NoID", stream, []events.Event{newEvent("X"), noID}},
		{"NoType", stream, []events.Event{noType}},
	}
	for _, c := range cases {
		_, err := e.log.Append(e.ctx, c.stream, events.Any{}, c.evs...)
		if !errors.Is(err, events.ErrInvalid) {
			e.Errorf("%s: err = %v, want ErrInvalid", c.name, err)
		}
	}
	if _, err := e.log.ReadStream(e.ctx, stream, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
		e.Errorf("after invalid appends: read err = %v, want ErrStreamNotFound", err)
	}
}

// testMaxEventSize: an event of exactly the cap is accepted; one byte more
// fails with a *TooLargeError that says what happened, and writes nothing.
func testMaxEventSize(e *env) {
	stream := e.stream("s")
	max := e.h.MaxEventSize
	ok := newEvent("Big")
	ok.Data = make([]byte, max-len(ok.Metadata))
	for i := range ok.Data {
		ok.Data[i] = byte(i)
	}
	e.mustAppend(stream, events.NoStream{}, ok)

	tooBig := newEvent("Big")
	tooBig.Data = make([]byte, max-len(tooBig.Metadata)+1)
	_, err := e.log.Append(e.ctx, stream, events.Exact(0), tooBig)
	if !errors.Is(err, events.ErrTooLarge) {
		e.Fatalf("append of %d bytes: err = %v, want ErrTooLarge", max+1, err)
	}
	var tl *events.TooLargeError
	if !errors.As(err, &tl) {
		e.Fatalf("err = %v (%T), want a *events.TooLargeError", err, err)
	}
	if tl.Size != max+1 || tl.Max != max || tl.Stream != stream {
		e.Errorf("TooLargeError = %+v, want size %d, max %d, stream %s", *tl, max+1, max, stream)
	}
	if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(max+1)) || !strings.Contains(msg, fmt.Sprint(max)) {
		e.Errorf("error %q should give the size and the cap", msg)
	}
	e.checkStream(stream, []events.Event{ok})
}
