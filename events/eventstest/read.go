package eventstest

import (
	"errors"
	"strings"

	"github.com/hookline/hookline/events"
)

// testReadStream: forwards and backwards, from a revision, from End, in
// pages, and past the end.
func testReadStream(e *env) {
	stream := e.stream("s")
	evs := newEvents(10, "Read")
	e.mustAppend(stream, events.NoStream{}, evs[:4]...)
	e.mustAppend(stream, events.Exact(3), evs[4:5]...)
	e.mustAppend(stream, events.Exact(4), evs[5:]...)

	revs := func(recs []events.Record) []int {
		out := make([]int, len(recs))
		for i, r := range recs {
			out[i] = int(r.Revision)
			if d := sameEvent(r, evs[r.Revision]); d != "" {
				e.Errorf("%s@%d: %s", r.Stream, r.Revision, d)
			}
		}
		return out
	}
	read := func(dir events.Direction, from events.Revision, max int) []int {
		e.Helper()
		recs, err := e.log.ReadStream(e.ctx, stream, dir, from, max)
		if err != nil {
			e.Fatalf("read %s dir %d from %d max %d: %v", stream, dir, from, max, err)
		}
		return revs(recs)
	}
	cases := []struct {
		name string
		dir  events.Direction
		from events.Revision
		max  int
		want []int
	}{
		{"ForwardsAll", events.Forwards, 0, 100, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
		{"ForwardsFromMiddle", events.Forwards, 4, 2, []int{4, 5}},
		{"ForwardsLastOne", events.Forwards, 9, 5, []int{9}},
		{"ForwardsPastEnd", events.Forwards, 10, 5, []int{}},
		{"BackwardsFromEnd", events.Backwards, events.End, 3, []int{9, 8, 7}},
		{"BackwardsFromMiddle", events.Backwards, 6, 100, []int{6, 5, 4, 3, 2, 1, 0}},
		{"BackwardsFirst", events.Backwards, 0, 5, []int{0}},
	}
	for _, c := range cases {
		if got := read(c.dir, c.from, c.max); !equalInts(got, c.want) {
			e.Errorf("%s: revisions %v, want %v", c.name, got, c.want)
		}
	}

	// Paging forwards and backwards visits every event once.
	var fwd, bwd []int
	for from := events.Revision(0); ; {
		page := read(events.Forwards, from, 3)
		if len(page) == 0 {
			break
		}
		fwd = append(fwd, page...)
		from = events.Revision(page[len(page)-1] + 1)
	}
	for from := events.End; ; {
		page := read(events.Backwards, from, 4)
		bwd = append(bwd, page...)
		if len(page) == 0 || page[len(page)-1] == 0 {
			break
		}
		from = events.Revision(page[len(page)-1] - 1)
	}
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !equalInts(fwd, want) {
		e.Errorf("paging forwards by 3: %v, want %v", fwd, want)
	}
	if want := []int{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}; !equalInts(bwd, want) {
		e.Errorf("paging backwards by 4: %v, want %v", bwd, want)
	}
}

// testReadStreamNotFound: a stream never written does not exist, either way.
func testReadStreamNotFound(e *env) {
	stream := e.stream("never")
	for _, dir := range []events.Direction{events.Forwards, events.Backwards} {
		from := events.Revision(0)
		if dir == events.Backwards {
			from = events.End
		}
		recs, err := e.log.ReadStream(e.ctx, stream, dir, from, 10)
		if !errors.Is(err, events.ErrStreamNotFound) {
			e.Errorf("read %s dir %d: %d records, err = %v; want ErrStreamNotFound", stream, dir, len(recs), err)
		}
	}
	// A neighbour's name is not a prefix match.
	e.mustAppend(e.stream("neverx"), events.NoStream{}, newEvent("X"))
	if _, err := e.log.ReadStream(e.ctx, stream, events.Forwards, 0, 10); !errors.Is(err, events.ErrStreamNotFound) {
		e.Errorf("read %s next to %sx: err = %v; want ErrStreamNotFound", stream, stream, err)
	}
}

// testReadAll: the whole log in position order, paged, from a position
// (excluded); our events in the order we appended them, foreign ones between.
func testReadAll(e *env) {
	from, err := e.log.Head(e.ctx)
	if err != nil {
		e.Fatalf("head: %v", err)
	}
	var want []events.Event
	for i := range 6 {
		evs := newEvents(1+i%3, "All")
		e.mustAppend(e.stream([]string{"a", "b", "c"}[i%3]), events.Any{}, evs...)
		want = append(want, evs...)
	}
	var (
		got  []events.Record
		last = from
	)
	for len(got) < len(want) {
		page, err := e.log.ReadAll(e.ctx, last, 4)
		if err != nil {
			e.Fatalf("read all from %s: %v", last, err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) > 4 {
			e.Fatalf("read all max 4 returned %d", len(page))
		}
		for _, r := range page {
			if !last.Less(r.Position) {
				e.Fatalf("read all from %s: position %s is not after %s", from, r.Position, last)
			}
			last = r.Position
			if strings.HasPrefix(r.Stream, e.prefix) {
				got = append(got, r)
			}
		}
	}
	e.checkSeen(got, want)
}

// testHead: Head is at or after every acknowledged append, and a reader of
// the log from before finds the append by Head.
func testHead(e *env) {
	before, err := e.log.Head(e.ctx)
	if err != nil {
		e.Fatalf("head: %v", err)
	}
	res := e.mustAppend(e.stream("s"), events.NoStream{}, newEvent("H"))
	after, err := e.log.Head(e.ctx)
	if err != nil {
		e.Fatalf("head: %v", err)
	}
	if !before.Less(res.Position) || after.Less(res.Position) {
		e.Errorf("head %s before and %s after an append at %s", before, after, res.Position)
	}
	seen := e.collect(e.ctx, before, e.own(), func(seen []events.Record) bool {
		return !seen[len(seen)-1].Position.Less(res.Position)
	})
	if len(seen) != 1 || seen[0].Position != res.Position {
		e.Errorf("subscribed from head %s, saw %d records, want the one at %s", before, len(seen), res.Position)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
