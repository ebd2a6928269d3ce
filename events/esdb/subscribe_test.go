package esdb_test

import (
	"context"
	"errors"
	"testing"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/esdb"
)

// A subscription that drops is made again from the last event received:
// the event that the server sends again is not repeated, none is skipped,
// and system events and filtered-out events never reach fn.
func TestSubscribeResubscribesFromLastEvent(t *testing.T) {
	fake, url := startFake(t,
		[]fakeEvent{
			{"tenant-a", "TenantCreated", 10},
			{"$stats-node", "$statsCollected", 15},
			{"endpoint-b", "EndpointCreated", 20},
		},
		[]fakeEvent{
			{"endpoint-b", "EndpointCreated", 20}, // sent again after the drop
			{"endpoint-c", "EndpointCreated", 30},
			{"endpoint-c", "$>", 35},
			{"tenant-d", "TenantCreated", 40},
		},
	)
	l, err := esdb.Open(context.Background(), esdb.Config{ConnectionString: url})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []uint64
	done := errors.New("done")
	err = l.Subscribe(ctx, events.Position{Commit: 5, Prepare: 5}, events.Filter{Types: []string{"EndpointCreated", "TenantCreated"}},
		func(recs []events.Record, _ events.Position) error {
			for _, r := range recs {
				got = append(got, r.Position.Commit)
			}
			if len(got) >= 4 {
				return done
			}
			return nil
		})
	if !errors.Is(err, done) {
		t.Fatalf("Subscribe() = %v, want fn's error", err)
	}
	want := []uint64{10, 20, 30, 40}
	if len(got) != len(want) {
		t.Fatalf("positions = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("positions = %v, want %v", got, want)
		}
	}
	if first, second := <-fake.from, <-fake.from; first != [2]uint64{5, 5} || second != [2]uint64{20, 20} {
		t.Errorf("subscribed from %v then %v, want [5 5] then [20 20]", first, second)
	}
}

func TestSubscribeEndsWithContext(t *testing.T) {
	fake, url := startFake(t)
	l, err := esdb.Open(context.Background(), esdb.Config{ConnectionString: url})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- l.Subscribe(ctx, events.Start, events.Filter{}, func([]events.Record, events.Position) error { return nil })
	}()
	<-fake.from // subscribed
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Subscribe() = %v, want context.Canceled", err)
	}
}
