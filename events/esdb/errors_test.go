package esdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/uuid"
	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/esdb"
)

func openFake(t *testing.T) (*esdb.Log, *fakeServer) {
	t.Helper()
	fake, url := startFake(t)
	l, err := esdb.Open(context.Background(), esdb.Config{ConnectionString: url})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, fake
}

func event() events.Event {
	return events.Event{ID: uuid.New(), Type: "TenantCreated", Data: []byte{1}, Metadata: []byte(`{}`)}
}

// The translation table, exercised through the client against a fake
// server, so the errors are the ones that the client really builds.
func TestAppendErrors(t *testing.T) {
	l, _ := openFake(t)
	ctx := context.Background()

	wrong := func(actual events.Revision, exists bool) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			var w *events.WrongRevisionError
			if !errors.As(err, &w) || !errors.Is(err, events.ErrWrongRevision) {
				t.Fatalf("err = %v, want a *WrongRevisionError", err)
			}
			if w.Exists != exists || (exists && w.Actual != actual) {
				t.Errorf("actual = %d exists = %v, want %d %v", w.Actual, w.Exists, actual, exists)
			}
			if w.Expected != (events.NoStream{}) {
				t.Errorf("expected = %v, want no stream", w.Expected)
			}
		}
	}
	is := func(target error) func(*testing.T, error) {
		return func(t *testing.T, err error) {
			if !errors.Is(err, target) {
				t.Fatalf("err = %v, want %v", err, target)
			}
		}
	}
	for _, tc := range []struct {
		stream string
		check  func(*testing.T, error)
	}{
		{"tenant-wrong-5", wrong(5, true)},
		{"tenant-wrong-0", wrong(0, true)},
		{"tenant-wrong-none", wrong(0, false)},
		{"tenant-conflict-7", wrong(7, true)},
		{"tenant-conflict--1", wrong(0, false)},
		{"tenant-large", is(events.ErrTooLarge)},
		{"tenant-deleted", is(events.ErrStreamNotFound)},
		{"tenant-broken", func(t *testing.T, err error) {
			for _, s := range []error{events.ErrWrongRevision, events.ErrStreamNotFound, events.ErrTooLarge, events.ErrClosed} {
				if errors.Is(err, s) {
					t.Fatalf("err = %v, must not match %v", err, s)
				}
			}
			var kerr *kurrentdb.Error
			if err == nil || !errors.As(err, &kerr) {
				t.Fatalf("err = %v, want the client's error wrapped", err)
			}
		}},
	} {
		t.Run(tc.stream, func(t *testing.T) {
			_, err := l.Append(ctx, tc.stream, events.NoStream{}, event())
			tc.check(t, err)
		})
	}
}

func TestReadStreamNotFound(t *testing.T) {
	l, _ := openFake(t)
	_, err := l.ReadStream(context.Background(), "tenant-missing", events.Forwards, 0, 10)
	if !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatalf("err = %v, want ErrStreamNotFound", err)
	}
}

func TestAppendResult(t *testing.T) {
	l, _ := openFake(t)
	ctx := context.Background()
	t.Run("position from the server", func(t *testing.T) {
		res, err := l.Append(ctx, "tenant-a", events.Exact(3), event())
		if err != nil {
			t.Fatal(err)
		}
		want := events.AppendResult{Revision: 4, Position: events.Position{Commit: 100, Prepare: 90}}
		if res != want {
			t.Errorf("result = %+v, want %+v", res, want)
		}
	})
	t.Run("idempotent append reads the position back", func(t *testing.T) {
		res, err := l.Append(ctx, "tenant-idem-2", events.Exact(1), event())
		if err != nil {
			t.Fatal(err)
		}
		want := events.AppendResult{Revision: 2, Position: events.Position{Commit: 70, Prepare: 60}}
		if res != want {
			t.Errorf("result = %+v, want %+v", res, want)
		}
	})
}

func TestAppendChecksSizeBeforeSending(t *testing.T) {
	fake, url := startFake(t)
	l, err := esdb.Open(context.Background(), esdb.Config{ConnectionString: url, MaxEventSize: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ev := event()
	ev.Data = make([]byte, 11)
	_, err = l.Append(context.Background(), "tenant-a", events.NoStream{}, ev)
	var tl *events.TooLargeError
	if !errors.As(err, &tl) || tl.Max != 10 {
		t.Fatalf("err = %v, want a *TooLargeError with Max 10", err)
	}
	select {
	case s := <-fake.appends:
		t.Fatalf("append to %s reached the server", s)
	default:
	}
}

// An append that creates an expiring stream sets its $maxAge first, on the
// stream's metadata stream; other appends write once.
func TestRetentionWrittenOnCreation(t *testing.T) {
	l, fake := openFake(t)
	ctx := context.Background()
	for _, tc := range []struct {
		stream   string
		expected events.ExpectedRevision
		want     []string
	}{
		{"event-t1.e1", events.NoStream{}, []string{"$$event-t1.e1", "event-t1.e1"}},
		{"delivery-d1", events.NoStream{}, []string{"$$delivery-d1", "delivery-d1"}},
		{"delivery-d1", events.Any{}, []string{"$$delivery-d1", "delivery-d1"}},
		{"delivery-d1", events.Exact(0), []string{"delivery-d1"}},
		{"delivery-d1", events.StreamExists{}, []string{"delivery-d1"}},
		{"endpoint-x", events.NoStream{}, []string{"endpoint-x"}},
		{"tenant-t1", events.NoStream{}, []string{"tenant-t1"}},
	} {
		t.Run(tc.stream+" "+tc.expected.String(), func(t *testing.T) {
			if _, err := l.Append(ctx, tc.stream, tc.expected, event()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for range tc.want {
				got = append(got, <-fake.appends)
			}
			select {
			case s := <-fake.appends:
				got = append(got, s)
			default:
			}
			if len(got) != len(tc.want) || got[0] != tc.want[0] || got[len(got)-1] != tc.want[len(tc.want)-1] {
				t.Errorf("appends = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestClosed(t *testing.T) {
	l, _ := openFake(t)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.Append(ctx, "tenant-a", events.Any{}, event()); !errors.Is(err, events.ErrClosed) {
		t.Errorf("append: err = %v, want ErrClosed", err)
	}
	if _, err := l.ReadStream(ctx, "tenant-a", events.Forwards, 0, 1); !errors.Is(err, events.ErrClosed) {
		t.Errorf("read stream: err = %v, want ErrClosed", err)
	}
	if _, err := l.ReadAll(ctx, events.Start, 1); !errors.Is(err, events.ErrClosed) {
		t.Errorf("read all: err = %v, want ErrClosed", err)
	}
	if _, err := l.Head(ctx); !errors.Is(err, events.ErrClosed) {
		t.Errorf("head: err = %v, want ErrClosed", err)
	}
	err := l.Subscribe(ctx, events.Start, events.Filter{}, func([]events.Record, events.Position) error { return nil })
	if !errors.Is(err, events.ErrClosed) {
		t.Errorf("subscribe: err = %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, events.ErrClosed) {
		t.Errorf("second close: err = %v, want ErrClosed", err)
	}
}
