package events_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
)

func TestCheckAppend(t *testing.T) {
	ok := events.Event{ID: uuid.New(), Type: "T", Data: make([]byte, 6), Metadata: make([]byte, 4)}
	noID, noType, big := ok, ok, ok
	noID.ID = uuid.Nil
	noType.Type = ""
	big.Data = make([]byte, 7)
	cases := []struct {
		name   string
		stream string
		max    int
		evs    []events.Event
		want   error
		msg    string
	}{
		{"Valid", "s", 10, []events.Event{ok, ok}, nil, ""},
		{"ExactlyMax", "s", 10, []events.Event{ok}, nil, ""},
		{"NoCap", "s", 0, []events.Event{big}, nil, ""},
		{"EmptyStream", "", 10, []events.Event{ok}, events.ErrInvalid, "empty stream name"},
		{"NoEvents", "s", 10, nil, events.ErrInvalid, "no events for s"},
		{"NoID", "s", 10, []events.Event{ok, noID}, events.ErrInvalid, "event 1 of s has no id"},
		{"NoType", "s", 10, []events.Event{noType}, events.ErrInvalid, "event 0 of s has no type"},
		{"TooLarge", "s", 10, []events.Event{ok, ok, big}, events.ErrTooLarge, "event 2 of append to s is 11 bytes, over the 10-byte cap"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := events.CheckAppend(c.stream, c.max, c.evs)
			if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if err != nil && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("err = %q, want it to contain %q", err, c.msg)
			}
		})
	}
	var tl *events.TooLargeError
	if err := events.CheckAppend("s", 10, []events.Event{big}); !errors.As(err, &tl) || tl.Size != 11 || tl.Max != 10 || tl.Index != 0 {
		t.Errorf("CheckAppend of an oversized event: %v, want a *TooLargeError{Size: 11, Max: 10}", err)
	}
}

func TestWrongRevisionError(t *testing.T) {
	cases := []struct {
		name string
		err  *events.WrongRevisionError
		want string
	}{
		{"Exists", &events.WrongRevisionError{Stream: "endpoint-1", Expected: events.Exact(3), Actual: 5, Exists: true},
			"events: wrong expected revision on endpoint-1: expected revision 3, stream is at revision 5"},
		{"Missing", &events.WrongRevisionError{Stream: "tenant-1", Expected: events.StreamExists{}, Actual: 9},
			"events: wrong expected revision on tenant-1: expected stream exists, stream is at no stream"},
		{"NoStream", &events.WrongRevisionError{Stream: "event-t.e", Expected: events.NoStream{}, Exists: true},
			"events: wrong expected revision on event-t.e: expected no stream, stream is at revision 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.err.Error(); got != c.want {
				t.Errorf("Error() = %q\nwant      %q", got, c.want)
			}
			wrapped := fmt.Errorf("append: %w", c.err)
			if !errors.Is(wrapped, events.ErrWrongRevision) {
				t.Error("a wrapped *WrongRevisionError does not match ErrWrongRevision")
			}
			if errors.Is(wrapped, events.ErrTooLarge) || errors.Is(wrapped, events.ErrStreamNotFound) {
				t.Error("a *WrongRevisionError matches another sentinel")
			}
			var wr *events.WrongRevisionError
			if !errors.As(wrapped, &wr) || wr != c.err {
				t.Error("errors.As does not find the *WrongRevisionError")
			}
		})
	}
}

func TestExpectedRevision(t *testing.T) {
	cases := []struct {
		exp  events.ExpectedRevision
		want string
	}{
		{events.Any{}, "any"},
		{events.NoStream{}, "no stream"},
		{events.StreamExists{}, "stream exists"},
		{events.Exact(0), "revision 0"},
		{events.Exact(42), "revision 42"},
		{events.ExpectAfter(7, true), "revision 7"},
		{events.ExpectAfter(7, false), "no stream"},
	}
	for _, c := range cases {
		if got := c.exp.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.exp, got, c.want)
		}
	}
}
