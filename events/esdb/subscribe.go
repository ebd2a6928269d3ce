package esdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/hookline/hookline/events"
)

// Subscription tuning. A dropped subscription is made again from the last
// event received, after a delay that doubles from resubscribeMin up to
// resubscribeMax; after resubscribeAttempts drops in a row with no event in
// between, Subscribe gives up and returns the last error.
const (
	maxBatch            = 256
	resubscribeMin      = 100 * time.Millisecond
	resubscribeMax      = 5 * time.Second
	resubscribeAttempts = 8
)

// Subscribe implements [events.Log] on a catch-up subscription to $all.
//
// One kind of filter runs on the server: the stream prefixes when there are
// any, else the event types (as prefixes; the exact match is checked here),
// else a filter that excludes system events. Everything is checked again
// here, and system events ($-streams, $-types) never reach fn.
//
// fn receives what the subscription has already delivered, up to 256
// records at a time, so catch-up comes in large batches and live events in
// small ones. When the subscription drops (the server restarts, a leader
// changes), it is made again from the last event received, which the server
// excludes, so nothing is skipped or repeated; checkpoints are not used for
// this because some server versions have reported checkpoints past
// undelivered events.
func (l *Log) Subscribe(ctx context.Context, from events.Position, filter events.Filter, fn events.SubscribeFunc) error {
	if l.closed.Load() {
		return fmt.Errorf("subscribe: %w", events.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	last := from
	delay, drops := resubscribeMin, 0
	for {
		progressed, err := l.subscribeOnce(ctx, &last, filter, fn)
		if err == nil {
			err = errors.New("subscription ended")
		}
		var fnErr callbackError
		switch {
		case errors.As(err, &fnErr):
			return fnErr.err
		case ctx.Err() != nil:
			return ctx.Err()
		case l.closed.Load() || errors.Is(err, events.ErrClosed):
			return fmt.Errorf("subscribe: %w", events.ErrClosed)
		}
		if progressed {
			delay, drops = resubscribeMin, 0
		}
		drops++
		if drops > resubscribeAttempts {
			return fmt.Errorf("subscribe from %s: dropped %d times in a row: %w", last, drops-1, err)
		}
		l.log.Warn("esdb subscription dropped, resubscribing",
			"position", last.String(), "attempt", drops, "delay", delay, "error", err)
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, resubscribeMax)
	}
}

// callbackError carries an error of the subscriber's fn, which ends the
// subscription as it is.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// subscribeOnce runs one subscription from *last until it drops, ctx ends
// or fn fails, advancing *last past every event that it has handled.
// progressed tells whether any event arrived.
func (l *Log) subscribeOnce(ctx context.Context, last *events.Position, filter events.Filter, fn events.SubscribeFunc) (progressed bool, err error) {
	through := *last // how far the subscriber knows the log was read
	sub, err := l.client.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{
		From:   allPosition(*last),
		Filter: serverFilter(filter),
	})
	if err != nil {
		return false, translate("subscribe", "$all", nil, err)
	}

	// The client's Recv blocks; a pump goroutine turns it into a channel
	// so that what has arrived can be drained into one batch. It ends when
	// the subscription drops, which sub.Close below causes.
	recv := make(chan *kurrentdb.SubscriptionEvent, maxBatch)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ev := sub.Recv()
			select {
			case recv <- ev:
			case <-done:
				return
			}
			if ev.SubscriptionDropped != nil {
				return
			}
		}
	}()
	defer func() {
		close(done)
		_ = sub.Close()
		wg.Wait()
	}()

	batch := make([]events.Record, 0, maxBatch)
	reported := through
	for {
		var ev *kurrentdb.SubscriptionEvent
		select {
		case <-ctx.Done():
			return progressed, ctx.Err()
		case ev = <-recv:
		}
		batch = batch[:0]
		seen := *last
		var dropped error
		for {
			switch {
			case ev.SubscriptionDropped != nil:
				dropped = ev.SubscriptionDropped.Error
				if dropped == nil {
					dropped = errors.New("subscription dropped")
				}
			case ev.EventAppeared != nil:
				progressed = true
				r := record(ev.EventAppeared)
				if seen.Less(r.Position) {
					seen = r.Position
					if !system(r.Stream, r.Type) && filter.Match(&r) {
						batch = append(batch, r)
					}
				}
			case ev.CheckPointReached != nil:
				// The server read the log this far without a matching
				// event: only through moves (see doc.go).
				if p := (events.Position{Commit: ev.CheckPointReached.Commit, Prepare: ev.CheckPointReached.Prepare}); through.Less(p) {
					through = p
				}
			case ev.CaughtUp != nil && ev.CaughtUp.Position != nil:
				if p := (events.Position{Commit: ev.CaughtUp.Position.Commit, Prepare: ev.CaughtUp.Position.Prepare}); through.Less(p) {
					through = p
				}
			}
			if dropped != nil || len(batch) == maxBatch {
				break
			}
			var more bool
			select {
			case ev, more = <-recv:
			default:
			}
			if !more {
				break
			}
		}
		moved := through.Less(seen)
		if moved {
			through = seen
		}
		if len(batch) > 0 || moved || through != reported {
			if err := fn(batch, through); err != nil {
				return progressed, callbackError{err}
			}
			reported = through
		}
		*last = seen
		if dropped != nil {
			return progressed, translate("subscribe", "$all", nil, dropped)
		}
	}
}

// serverFilter picks the one kind of filter that the server applies: the
// event types when there are some (they leave out the published events and
// their payloads, which no projection reads), else the stream prefixes.
// Partitions have no server-side filter here: they are checked in this
// process, from the metadata, before anything is decoded.
func serverFilter(f events.Filter) *kurrentdb.SubscriptionFilter {
	switch {
	case len(f.Types) > 0:
		return &kurrentdb.SubscriptionFilter{Type: kurrentdb.EventFilterType, Prefixes: f.Types}
	case len(f.StreamPrefixes) > 0:
		return &kurrentdb.SubscriptionFilter{Type: kurrentdb.StreamFilterType, Prefixes: f.StreamPrefixes}
	}
	return kurrentdb.ExcludeSystemEventsFilter()
}
