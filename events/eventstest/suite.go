package eventstest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
)

// Harness tells the suite how to get the log under test.
type Harness struct {
	// New returns the log for one case. It may return the same log to every
	// case (a shared server); it closes what it opens, e.g. in t.Cleanup.
	New func(t *testing.T) events.Log
	// MaxEventSize is the backend's cap on one event's data plus metadata;
	// 0 means events.DefaultMaxEventSize.
	MaxEventSize int
	// Owned says that New returns a fresh log that the case alone uses, so
	// the suite may Close it (and check events.ErrClosed afterwards). The
	// harness's own cleanup must then tolerate a log already closed.
	Owned bool
}

// caseTimeout bounds every case: a hang fails the case, not the run.
const caseTimeout = 60 * time.Second

// Run runs the conformance suite against h, each case as a parallel subtest.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("eventstest: Harness.New is nil")
	}
	if h.MaxEventSize == 0 {
		h.MaxEventSize = events.DefaultMaxEventSize
	}
	run := randomHex(4)
	cases := []struct {
		name string
		fn   func(*env)
	}{
		{"RoundTrip", testRoundTrip},
		{"AppendAtomic", testAppendAtomic},
		{"ExpectedRevision", testExpectedRevision},
		{"Idempotent", testIdempotent},
		{"ConcurrentExact", testConcurrentExact},
		{"Invalid", testInvalid},
		{"MaxEventSize", testMaxEventSize},
		{"ReadStream", testReadStream},
		{"ReadStreamNotFound", testReadStreamNotFound},
		{"ReadAll", testReadAll},
		{"Head", testHead},
		{"SubscribeFromStart", testSubscribeFromStart},
		{"SubscribeFromPosition", testSubscribeFromPosition},
		{"SubscribeLive", testSubscribeLive},
		{"SubscribeResume", testSubscribeResume},
		{"FilterStreamPrefix", testFilterStreamPrefix},
		{"FilterType", testFilterType},
		{"Partitions", testPartitions},
		{"FilterPartitions", testFilterPartitions},
		{"FilterProgress", testFilterProgress},
		{"SubscribeCancel", testSubscribeCancel},
		{"Vault", testVault},
		{"DropStreams", testDropStreams},
		{"Closed", testClosed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), caseTimeout)
			t.Cleanup(cancel) // after the case's parallel subtests too
			c.fn(&env{T: t, ctx: ctx, h: h, log: h.New(t), prefix: "conf" + run + strings.ToLower(c.name) + "-"})
		})
	}
}

// env is what a case works with.
type env struct {
	*testing.T
	ctx    context.Context
	h      Harness
	log    events.Log
	prefix string // of every stream the case writes
}

// stream names one of the case's streams.
func (e *env) stream(name string) string { return e.prefix + name }

// streamWith returns stream "s" of e holding the n events it returns,
// named label; with n = 0 the stream is not created.
func (e *env) streamWith(n int, label string) (string, []events.Event) {
	stream := e.stream("s")
	evs := newEvents(n, label)
	if n > 0 {
		e.mustAppend(stream, events.NoStream{}, evs...)
	}
	return stream, evs
}

// sub returns an env for a subtest, with its own stream prefix.
func (e *env) sub(t *testing.T, name string) *env {
	return &env{T: t, ctx: e.ctx, h: e.h, log: e.log, prefix: e.prefix + strings.ToLower(name) + "."}
}

// own is the filter of the case's streams.
func (e *env) own() events.Filter { return events.Filter{StreamPrefixes: []string{e.prefix}} }

// newEvent returns an event with a fresh id and some data and metadata.
func newEvent(typ string) events.Event {
	return events.Event{
		ID:       uuid.New(),
		Type:     typ,
		Data:     []byte("data " + randomHex(8)),
		Metadata: []byte(`{"m":"` + randomHex(4) + `"}`),
	}
}

func newEvents(n int, typ string) []events.Event {
	evs := make([]events.Event, n)
	for i := range evs {
		evs[i] = newEvent(typ)
	}
	return evs
}

// mustAppend appends and fails the case on error.
func (e *env) mustAppend(stream string, expected events.ExpectedRevision, evs ...events.Event) events.AppendResult {
	e.Helper()
	res, err := e.log.Append(e.ctx, stream, expected, evs...)
	if err != nil {
		e.Fatalf("append %d events to %s expecting %s: %v", len(evs), stream, expected, err)
	}
	return res
}

// readStream reads a whole stream forwards.
func (e *env) readStream(stream string) []events.Record {
	e.Helper()
	recs, err := e.log.ReadStream(e.ctx, stream, events.Forwards, 0, 10_000)
	if err != nil {
		e.Fatalf("read %s: %v", stream, err)
	}
	return recs
}

// sameEvent reports how r differs from ev ("" when it matches).
func sameEvent(r events.Record, ev events.Event) string {
	var diffs []string
	if r.ID != ev.ID {
		diffs = append(diffs, fmt.Sprintf("id %s, want %s", r.ID, ev.ID))
	}
	if r.Type != ev.Type {
		diffs = append(diffs, fmt.Sprintf("type %q, want %q", r.Type, ev.Type))
	}
	if !bytes.Equal(r.Data, ev.Data) {
		diffs = append(diffs, fmt.Sprintf("data %q, want %q", clip(r.Data), clip(ev.Data)))
	}
	if !bytes.Equal(r.Metadata, ev.Metadata) {
		diffs = append(diffs, fmt.Sprintf("metadata %q, want %q", clip(r.Metadata), clip(ev.Metadata)))
	}
	if r.Partition != ev.Partition {
		diffs = append(diffs, fmt.Sprintf("partition %d, want %d", r.Partition, ev.Partition))
	}
	return strings.Join(diffs, "; ")
}

// checkStream fails unless stream holds exactly evs, in order, at revisions
// 0.., with positions strictly increasing.
func (e *env) checkStream(stream string, evs []events.Event) []events.Record {
	e.Helper()
	recs := e.readStream(stream)
	if len(recs) != len(evs) {
		e.Fatalf("%s has %d events, want %d", stream, len(recs), len(evs))
	}
	for i, r := range recs {
		if d := sameEvent(r, evs[i]); d != "" {
			e.Errorf("%s event %d: %s", stream, i, d)
		}
		if r.Stream != stream || r.Revision != events.Revision(i) {
			e.Errorf("%s event %d is %s@%d", stream, i, r.Stream, r.Revision)
		}
		if i > 0 && !recs[i-1].Position.Less(r.Position) {
			e.Errorf("%s: position %s of revision %d is not after %s", stream, r.Position, i, recs[i-1].Position)
		}
	}
	return recs
}

// wantWrongRevision fails unless err is a *WrongRevisionError about stream
// saying it is at actual (exists=false: no stream).
func (e *env) wantWrongRevision(err error, stream string, actual events.Revision, exists bool) {
	e.Helper()
	if !errors.Is(err, events.ErrWrongRevision) {
		e.Fatalf("append to %s: err = %v, want events.ErrWrongRevision", stream, err)
	}
	var wr *events.WrongRevisionError
	if !errors.As(err, &wr) {
		e.Fatalf("append to %s: err = %v (%T), want a *events.WrongRevisionError", stream, err, err)
	}
	if wr.Stream != stream || wr.Exists != exists || (exists && wr.Actual != actual) {
		e.Errorf("WrongRevisionError = %+v, want stream %s, exists %v, actual %d", *wr, stream, exists, actual)
	}
}

// errStop is what the cases' subscription callbacks return to end them.
var errStop = errors.New("eventstest: stop")

// collect subscribes from from with filter until done(seen) holds, and
// returns what it saw. It fails the case if the subscription ends otherwise.
func (e *env) collect(ctx context.Context, from events.Position, filter events.Filter, done func([]events.Record) bool) []events.Record {
	e.Helper()
	var seen []events.Record
	err := e.log.Subscribe(ctx, from, filter, func(recs []events.Record, _ events.Position) error {
		for _, r := range recs {
			if !filter.Match(&r) {
				return fmt.Errorf("record %s@%d type %s does not pass the filter %+v", r.Stream, r.Revision, r.Type, filter)
			}
			seen = append(seen, r)
		}
		if done(seen) {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) {
		e.Fatalf("subscribe from %s: %v (after %d records)", from, err, len(seen))
	}
	return seen
}

// countAtLeast returns a done func for collect.
func countAtLeast(n int) func([]events.Record) bool {
	return func(seen []events.Record) bool { return len(seen) >= n }
}

// checkSeen fails unless seen are exactly evs in order, positions strictly
// increasing.
func (e *env) checkSeen(seen []events.Record, evs []events.Event) {
	e.Helper()
	if len(seen) != len(evs) {
		e.Errorf("saw %d events, want %d", len(seen), len(evs))
	}
	for i := range min(len(seen), len(evs)) {
		if d := sameEvent(seen[i], evs[i]); d != "" {
			e.Errorf("event %d (%s@%d): %s", i, seen[i].Stream, seen[i].Revision, d)
		}
		if i > 0 && !seen[i-1].Position.Less(seen[i].Position) {
			e.Errorf("event %d: position %s not after %s", i, seen[i].Position, seen[i-1].Position)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

func clip(b []byte) []byte {
	if len(b) > 40 {
		return b[:40]
	}
	return b
}
