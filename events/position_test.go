package events_test

import (
	"testing"

	"github.com/hookline/hookline/events"
)

func TestPositionOrder(t *testing.T) {
	// In ascending order.
	ordered := []events.Position{
		events.Start,
		{Commit: 0, Prepare: 1},
		{Commit: 1, Prepare: 0},
		{Commit: 1, Prepare: 1},
		{Commit: 1, Prepare: 9},
		{Commit: 2, Prepare: 2},
		{Commit: 1 << 63, Prepare: 0},
	}
	for i, p := range ordered {
		for j, q := range ordered {
			if got, want := p.Less(q), i < j; got != want {
				t.Errorf("%v.Less(%v) = %v, want %v", p, q, got, want)
			}
		}
	}
	if !events.Start.IsStart() || (events.Position{Prepare: 1}).IsStart() {
		t.Error("IsStart is wrong")
	}
	for _, c := range []struct {
		p    events.Position
		want string
	}{
		{events.Position{Commit: 7, Prepare: 7}, "7"},
		{events.Position{Commit: 9, Prepare: 4}, "9/4"},
		{events.Start, "0"},
	} {
		if got := c.p.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.p, got, c.want)
		}
	}
}

func TestFilter(t *testing.T) {
	rec := func(stream, typ string) *events.Record { return &events.Record{Stream: stream, Type: typ} }
	cases := []struct {
		name   string
		filter events.Filter
		rec    *events.Record
		want   bool
	}{
		{"ZeroPassesAll", events.Filter{}, rec("anything", "Any"), true},
		{"PrefixMatch", events.Filter{StreamPrefixes: []string{"delivery-", "event-"}}, rec("event-t.e", "X"), true},
		{"PrefixMiss", events.Filter{StreamPrefixes: []string{"delivery-"}}, rec("deliver", "X"), false},
		{"PrefixWholeName", events.Filter{StreamPrefixes: []string{"tenant-1"}}, rec("tenant-1", "X"), true},
		{"TypeMatch", events.Filter{Types: []string{"A", "B"}}, rec("s", "B"), true},
		{"TypeMiss", events.Filter{Types: []string{"A"}}, rec("s", "AB"), false},
		{"BothMustHold", events.Filter{StreamPrefixes: []string{"a"}, Types: []string{"T"}}, rec("a1", "U"), false},
		{"BothHold", events.Filter{StreamPrefixes: []string{"a"}, Types: []string{"T"}}, rec("a1", "T"), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.filter.Match(c.rec); got != c.want {
				t.Errorf("%+v.Match(%s, %s) = %v, want %v", c.filter, c.rec.Stream, c.rec.Type, got, c.want)
			}
		})
	}
	if !(events.Filter{}).IsZero() || (events.Filter{Types: []string{"A"}}).IsZero() {
		t.Error("IsZero is wrong")
	}
}
