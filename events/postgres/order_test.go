package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/postgres"
)

// TestConcurrentAppendersNoGap is the proof that whole-log positions follow
// commit order (doc.go): 32 appenders race, each on its own streams, while a
// live subscriber, started before them, checks that positions arrive
// strictly increasing; at the end it must have seen every acknowledged
// append exactly once, at the position the append returned, and nothing
// else. A backend whose positions were handed out at insert (a bigserial)
// would let the subscriber pass a position whose transaction had not
// committed yet, and lose its events for good.
func TestConcurrentAppendersNoGap(t *testing.T) {
	dsn := serverURL(t)
	l := open(t, postgres.Config{DSN: dsn, Schema: freshSchema(t, dsn)})
	proveNoGap(t, []*postgres.Log{l}, 32, 150)
	ws := l.WriterStats()
	t.Logf("writer: %d appends in %d groups, %d fallbacks", ws.Appends, ws.Groups, ws.Fallbacks)
}

// TestTwoLogsNoGap is the same proof with two Logs on one schema, as two
// nodes: each has its own writer committing its own groups, and the head
// lock orders their transactions. The subscriber reads through the second
// log and sees both logs' appends once, in order, without a gap.
func TestTwoLogsNoGap(t *testing.T) {
	dsn := serverURL(t)
	cfg := postgres.Config{DSN: dsn, Schema: freshSchema(t, dsn)}
	a, b := open(t, cfg), open(t, cfg)
	proveNoGap(t, []*postgres.Log{a, b}, 32, 100)
	for i, l := range []*postgres.Log{a, b} {
		ws := l.WriterStats()
		if ws.Appends == 0 {
			t.Errorf("log %d acknowledged no append", i)
		}
		t.Logf("log %d writer: %d appends in %d groups, %d fallbacks", i, ws.Appends, ws.Groups, ws.Fallbacks)
	}
}

// proveNoGap runs the proof: appenders race, appender a on logs[a%len],
// each on its own streams, while a live subscriber on the last log,
// started before them, checks that positions arrive strictly increasing;
// at the end it must have seen every acknowledged append exactly once, at
// the position the append returned, and nothing else. logs share one
// fresh schema.
func proveNoGap(t *testing.T, logs []*postgres.Log, appenders, appends int) {
	t.Helper()
	l := logs[len(logs)-1]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	type seen struct {
		stream   string
		revision events.Revision
		position events.Position
	}
	var (
		mu       sync.Mutex // guards got, bad
		got      = map[uuid.UUID]seen{}
		bad      []string
		progress = make(chan struct{}, 1)
	)
	subCtx, stopSub := context.WithCancel(ctx)
	subDone := make(chan error, 1)
	go func() {
		last := events.Start
		subDone <- l.Subscribe(subCtx, events.Start, events.Filter{}, func(recs []events.Record, _ events.Position) error {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range recs {
				if !last.Less(r.Position) {
					bad = append(bad, fmt.Sprintf("position %s after %s", r.Position, last))
				}
				last = r.Position
				if _, dup := got[r.ID]; dup {
					bad = append(bad, fmt.Sprintf("event %s at %s delivered twice", r.ID, r.Position))
				}
				got[r.ID] = seen{r.Stream, r.Revision, r.Position}
			}
			select {
			case progress <- struct{}{}:
			default:
			}
			return nil
		})
	}()

	type ack struct {
		ids []uuid.UUID
		res events.AppendResult
	}
	acks := make([][]ack, appenders)
	var wg sync.WaitGroup
	start := time.Now()
	for a := range appenders {
		wg.Go(func() {
			for i := range appends {
				stream := fmt.Sprintf("delivery-proof%d.%d", a, i%3)
				evs := make([]events.Event, 1+i%3)
				ids := make([]uuid.UUID, len(evs))
				for j := range evs {
					ids[j] = uuid.New()
					evs[j] = events.Event{ID: ids[j], Type: "AttemptFailed", Data: []byte("x")}
				}
				res, err := logs[a%len(logs)].Append(ctx, stream, events.Any{}, evs...)
				if err != nil {
					t.Errorf("appender %d: append %d: %v", a, i, err)
					return
				}
				acks[a] = append(acks[a], ack{ids, res})
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	want := map[uuid.UUID]events.Position{}
	var lastPositions []events.Position
	for _, as := range acks {
		for _, a := range as {
			for i, id := range a.ids {
				want[id] = events.Position{} // any position; the last one is checked
				if i == len(a.ids)-1 {
					want[id] = a.res.Position
				}
			}
			lastPositions = append(lastPositions, a.res.Position)
		}
	}
	head, err := l.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Wait, under the deadline, until the subscriber has reached the head.
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n >= len(want) {
			break
		}
		select {
		case <-progress:
		case err := <-subDone:
			t.Fatalf("subscription ended: %v", err)
		case <-ctx.Done():
			t.Fatalf("subscriber saw %d of %d events", n, len(want))
		}
	}
	stopSub()
	if err := <-subDone; !errors.Is(err, context.Canceled) {
		t.Errorf("subscription ended with %v", err)
	}

	mu.Lock()
	defer mu.Unlock()
	for _, b := range bad {
		t.Error(b)
	}
	if len(got) != len(want) {
		t.Errorf("subscriber saw %d events, %d were acknowledged", len(got), len(want))
	}
	positions := map[uint64]bool{}
	for id, pos := range want {
		s, ok := got[id]
		if !ok {
			t.Errorf("acknowledged event %s never delivered", id)
			continue
		}
		if !pos.IsStart() && s.position != pos {
			t.Errorf("event %s delivered at %s, its append said %s", id, s.position, pos)
		}
		positions[s.position.Commit] = true
	}
	// A fresh schema: positions are exactly 1..head, no gap, no spare.
	if uint64(len(positions)) != head.Commit {
		t.Errorf("%d distinct positions delivered, head is %s", len(positions), head)
	}
	for p := uint64(1); p <= head.Commit; p++ {
		if !positions[p] {
			t.Errorf("position %d never delivered", p)
			break
		}
	}
	t.Logf("%d logs, %d appenders × %d appends = %d appends, %d events in %s (%.0f appends/s); "+
		"subscriber saw %d events, positions 1..%d strictly increasing, no gap, no duplicate",
		len(logs), appenders, appends, len(lastPositions), len(want), elapsed.Round(time.Millisecond),
		float64(len(lastPositions))/elapsed.Seconds(), len(got), head.Commit)
}

// TestGroupFailuresAreIsolated: many appends at once, a third of them with
// a wrong expectation and one to a stream name too long to index (the
// server refuses it, and its group with it): whatever groups the writer
// formed, the wrong ones fail alone, the others all land, once each, at
// positions 1..n.
func TestGroupFailuresAreIsolated(t *testing.T) {
	dsn := serverURL(t)
	l := open(t, postgres.Config{DSN: dsn, Schema: freshSchema(t, dsn)})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const appenders, rounds = 48, 10
	long := make([]byte, 6000)
	_, _ = rand.Read(long) // crypto/rand.Read never fails
	longStream := "delivery-" + base64.StdEncoding.EncodeToString(long)

	errs := make([][]error, appenders)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for a := range appenders {
		wg.Go(func() {
			<-start
			stream := fmt.Sprintf("delivery-iso%d", a)
			for i := range rounds {
				// a%3 == 1 always expects a revision the stream never has.
				expected := events.ExpectAfter(events.Revision(i-1), i > 0)
				if a%3 == 1 {
					expected = events.Exact(1000)
				}
				s := stream
				if a == appenders-1 && i == rounds/2 {
					s, expected = longStream, events.NoStream{}
				}
				_, err := l.Append(ctx, s, expected, events.Event{ID: uuid.New(), Type: "Iso", Data: []byte("x")})
				errs[a] = append(errs[a], err)
			}
		})
	}
	close(start)
	wg.Wait()

	good := 0
	for a, es := range errs {
		for i, err := range es {
			switch {
			case a == appenders-1 && i == rounds/2:
				if !errors.Is(err, events.ErrInvalid) {
					t.Errorf("append to a stream name too long to index: %.200v, want ErrInvalid", err)
				}
			case a%3 == 1:
				if !errors.Is(err, events.ErrWrongRevision) {
					t.Errorf("appender %d, append %d with a wrong expectation: %v", a, i, err)
				}
			case a == appenders-1 && i > rounds/2:
				// Its expectations count the append that failed: wrong.
				if !errors.Is(err, events.ErrWrongRevision) {
					t.Errorf("appender %d, append %d after a failed one: %v", a, i, err)
				}
			case err != nil:
				t.Errorf("appender %d, append %d: %v", a, i, err)
			default:
				good++
			}
		}
	}
	recs, err := l.ReadAll(ctx, events.Start, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != good {
		t.Errorf("log holds %d events, %d appends were acknowledged", len(recs), good)
	}
	for i, r := range recs {
		if r.Position.Commit != uint64(i+1) {
			t.Fatalf("event %d at position %s, want %d", i, r.Position, i+1)
		}
	}
	ws := l.WriterStats()
	if ws.Fallbacks == 0 {
		t.Errorf("writer stats %+v: the refused append's group did not fall back", ws)
	}
	t.Logf("writer: %d appends in %d groups, %d fallbacks", ws.Appends, ws.Groups, ws.Fallbacks)
}
