package eventstest

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
)

// until returns a done func for collect: true once id was seen.
func until(id uuid.UUID) func([]events.Record) bool {
	return func(seen []events.Record) bool {
		for i := len(seen) - 1; i >= 0; i-- {
			if seen[i].ID == id {
				return true
			}
		}
		return false
	}
}

func (e *env) head() events.Position {
	e.Helper()
	p, err := e.log.Head(e.ctx)
	if err != nil {
		e.Fatalf("head: %v", err)
	}
	return p
}

// testSubscribeFromStart: a subscription from Start catches up on what is
// already in the log.
func testSubscribeFromStart(e *env) {
	evs := newEvents(5, "Sub")
	e.mustAppend(e.stream("a"), events.NoStream{}, evs[:2]...)
	e.mustAppend(e.stream("b"), events.NoStream{}, evs[2:]...)
	seen := e.collect(e.ctx, events.Start, e.own(), until(evs[4].ID))
	e.checkSeen(seen, evs)
}

// testSubscribeFromPosition: a subscription from a position starts right
// after it.
func testSubscribeFromPosition(e *env) {
	stream := e.stream("s")
	evs := newEvents(5, "Sub")
	var positions []events.Position
	for i, ev := range evs {
		res := e.mustAppend(stream, events.ExpectAfter(events.Revision(i-1), i > 0), ev)
		positions = append(positions, res.Position)
	}
	seen := e.collect(e.ctx, positions[1], e.own(), until(evs[4].ID))
	e.checkSeen(seen, evs[2:])
}

// liveSub is a subscription running in the background.
type liveSub struct {
	recs   chan events.Record // each record seen
	done   chan struct{}      // closed when Subscribe returned, err set
	err    error
	cancel context.CancelFunc
}

// liveSubscription runs Subscribe in the background, handing each record to
// the returned liveSub's recs.
func (e *env) liveSubscription(ctx context.Context, from events.Position, filter events.Filter) *liveSub {
	ctx, cancel := context.WithCancel(ctx)
	s := &liveSub{recs: make(chan events.Record, 1024), done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(s.done)
		s.err = e.log.Subscribe(ctx, from, filter, func(batch []events.Record, _ events.Position) error {
			for _, r := range batch {
				select {
				case s.recs <- r:
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			return nil
		})
	}()
	return s
}

// stop cancels the subscription and returns Subscribe's error.
func (s *liveSub) stop() error {
	s.cancel()
	select {
	case <-s.done:
		return s.err
	case <-time.After(10 * time.Second):
		return errors.New("subscription did not end within 10s of its context's cancellation")
	}
}

// next waits for a record from a live subscription.
func (e *env) next(recs <-chan events.Record, what string) events.Record {
	e.Helper()
	select {
	case r := <-recs:
		return r
	case <-e.ctx.Done():
		e.Fatalf("waiting for %s: %v", what, e.ctx.Err())
		return events.Record{}
	}
}

// testSubscribeLive: a subscriber waiting at the head is woken by each
// append, promptly, and sees every event once.
func testSubscribeLive(e *env) {
	sub := e.liveSubscription(e.ctx, e.head(), e.own())
	defer func() {
		if err := sub.stop(); !errors.Is(err, context.Canceled) {
			e.Errorf("subscription ended with %v, want context.Canceled", err)
		}
	}()
	stream := e.stream("s")
	var want []events.Event
	for i := range 5 {
		evs := newEvents(1+i%2, "Live")
		e.mustAppend(stream, events.Any{}, evs...)
		want = append(want, evs...)
		var seen []events.Record
		for range evs {
			seen = append(seen, e.next(sub.recs, "a live event"))
		}
		e.checkSeen(seen, evs)
	}
	select {
	case r := <-sub.recs:
		e.Errorf("unexpected extra event %s@%d", r.Stream, r.Revision)
	default:
	}
}

// testSubscribeResume: a subscriber that stops now and then and resumes from
// the last position it saw, while an appender keeps going, sees every event
// exactly once and in order.
func testSubscribeResume(e *env) {
	const total = 60
	from := e.head()
	want := make(chan []events.Event, total)
	appendErr := make(chan error, 1)
	go func() {
		defer close(want)
		n := 0
		for i := 0; n < total; i++ {
			evs := newEvents(min(1+i%3, total-n), "Resume")
			if _, err := e.log.Append(e.ctx, e.stream([]string{"a", "b"}[i%2]), events.Any{}, evs...); err != nil {
				appendErr <- err
				return
			}
			want <- evs
			n += len(evs)
		}
	}()

	var seen []events.Record
	last := from
	for sessions := 0; len(seen) < total; sessions++ {
		if sessions > total {
			e.Fatalf("no progress after %d sessions, %d events seen", sessions, len(seen))
		}
		// Stop after a few records, possibly in the middle of a batch: the
		// rest of that batch was not seen and must come again.
		budget := 7
		err := e.log.Subscribe(e.ctx, last, e.own(), func(recs []events.Record, _ events.Position) error {
			for _, r := range recs {
				seen = append(seen, r)
				last = r.Position
				if budget--; budget == 0 || len(seen) == total {
					return errStop
				}
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			e.Fatalf("subscribe from %s: %v", last, err)
		}
	}
	select {
	case err := <-appendErr:
		e.Fatalf("append: %v", err)
	default:
	}
	var all []events.Event
	for evs := range want {
		all = append(all, evs...)
	}
	e.checkSeen(seen, all)
}

// testFilterStreamPrefix: only streams starting with one of the prefixes.
func testFilterStreamPrefix(e *env) {
	from := e.head()
	var want []events.Event
	for _, name := range []string{"a-1", "b-1", "a-2", "ab-1", "c-1", "b-2", "a-1"} {
		ev := newEvent("Pre")
		e.mustAppend(e.stream(name), events.Any{}, ev)
		if name[:2] == "a-" || name[:2] == "c-" {
			want = append(want, ev)
		}
	}
	filter := events.Filter{StreamPrefixes: []string{e.stream("a-"), e.stream("c-")}}
	seen := e.collect(e.ctx, from, filter, until(want[len(want)-1].ID))
	e.checkSeen(seen, want)
}

// testFilterType: only events of the given types, alone and together with a
// stream prefix.
func testFilterType(e *env) {
	from := e.head()
	typA, typB, typC := "A"+randomHex(6), "B"+randomHex(6), "C"+randomHex(6)
	var wantTypes, wantBoth []events.Event
	for i, typ := range []string{typA, typB, typC, typA, typB, typA} {
		ev := newEvent(typ)
		stream := e.stream([]string{"x", "y"}[i%2])
		e.mustAppend(stream, events.Any{}, ev)
		if typ == typA || typ == typC {
			wantTypes = append(wantTypes, ev)
			if stream == e.stream("x") {
				wantBoth = append(wantBoth, ev)
			}
		}
	}
	types := events.Filter{Types: []string{typA, typC}}
	e.checkSeen(e.collect(e.ctx, from, types, until(wantTypes[len(wantTypes)-1].ID)), wantTypes)
	both := events.Filter{Types: []string{typA, typC}, StreamPrefixes: []string{e.stream("x")}}
	e.checkSeen(e.collect(e.ctx, from, both, until(wantBoth[len(wantBoth)-1].ID)), wantBoth)
}

// testSubscribeCancel: cancelling the context ends a subscription, live or
// not yet started, with the context's error.
func testSubscribeCancel(e *env) {
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	err := e.log.Subscribe(ctx, events.Start, e.own(), func([]events.Record, events.Position) error { return nil })
	if !errors.Is(err, context.Canceled) {
		e.Errorf("subscribe with a cancelled context: err = %v, want context.Canceled", err)
	}

	sub := e.liveSubscription(e.ctx, e.head(), e.own())
	e.mustAppend(e.stream("s"), events.NoStream{}, newEvent("Cancel"))
	e.next(sub.recs, "the event before cancelling")
	if err := sub.stop(); !errors.Is(err, context.Canceled) {
		e.Errorf("live subscription after cancel: err = %v, want context.Canceled", err)
	}

	ctx, cancel = context.WithTimeout(e.ctx, time.Millisecond)
	defer cancel()
	err = e.log.Subscribe(ctx, e.head(), e.own(), func([]events.Record, events.Position) error { return nil })
	if !errors.Is(err, context.DeadlineExceeded) {
		e.Errorf("subscription past its deadline: err = %v, want context.DeadlineExceeded", err)
	}
}

// testClosed: after Close, every call fails with ErrClosed, and a live
// subscription ends with it.
func testClosed(e *env) {
	if !e.h.Owned {
		e.Skip("the harness shares its log: the suite may not close it")
	}
	sub := e.liveSubscription(e.ctx, e.head(), e.own())
	defer sub.stop()
	e.mustAppend(e.stream("s"), events.NoStream{}, newEvent("Closed"))
	e.next(sub.recs, "an event before closing")
	if err := e.log.Close(); err != nil {
		e.Fatalf("close: %v", err)
	}
	select {
	case <-sub.done:
		if !errors.Is(sub.err, events.ErrClosed) {
			e.Errorf("subscription across Close: err = %v, want ErrClosed", sub.err)
		}
	case <-e.ctx.Done():
		e.Errorf("a live subscription did not end when its log closed")
	}
	wantClosed := func(what string, err error) {
		if !errors.Is(err, events.ErrClosed) {
			e.Errorf("%s after Close: err = %v, want ErrClosed", what, err)
		}
	}
	_, err := e.log.Append(e.ctx, e.stream("s"), events.Any{}, newEvent("Closed"))
	wantClosed("Append", err)
	_, err = e.log.ReadStream(e.ctx, e.stream("s"), events.Forwards, 0, 10)
	wantClosed("ReadStream", err)
	_, err = e.log.ReadAll(e.ctx, events.Start, 10)
	wantClosed("ReadAll", err)
	_, err = e.log.Head(e.ctx)
	wantClosed("Head", err)
	err = e.log.Subscribe(e.ctx, events.Start, e.own(), func([]events.Record, events.Position) error { return nil })
	wantClosed("Subscribe", err)
	wantClosed("Close", e.log.Close())
}
