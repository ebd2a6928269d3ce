package postgres_test

import (
	"context"
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
	const appenders, appends = 32, 150
	l := open(t, postgres.Config{DSN: withPool(t, dsn, appenders), Schema: freshSchema(t, dsn)})
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
		subDone <- l.Subscribe(subCtx, events.Start, events.Filter{}, func(recs []events.Record) error {
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
				res, err := l.Append(ctx, stream, events.Any{}, evs...)
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
	t.Logf("%d appenders × %d appends = %d appends, %d events in %s (%.0f appends/s); "+
		"subscriber saw %d events, positions 1..%d strictly increasing, no gap, no duplicate",
		appenders, appends, len(lastPositions), len(want), elapsed.Round(time.Millisecond),
		float64(len(lastPositions))/elapsed.Seconds(), len(got), head.Commit)
}
