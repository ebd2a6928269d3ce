package esdb

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/pause"
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
		if err := pause.For(ctx, delay); err != nil {
			return err
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
	sub, err := l.client.SubscribeToAll(ctx, kurrentdb.SubscribeToAllOptions{
		From:   allPosition(*last),
		Filter: serverFilter(filter),
	})
	if err != nil {
		return false, translate("subscribe", "$all", nil, err)
	}
	recv, stop := pump(sub)
	defer stop()

	rd := reading{filter: filter, through: *last, reported: *last, seen: *last, batch: make([]events.Record, 0, maxBatch)}
	for {
		var ev *kurrentdb.SubscriptionEvent
		select {
		case <-ctx.Done():
			return rd.progressed, ctx.Err()
		case ev = <-recv:
		}
		dropped := rd.drain(ev, recv)
		if err := rd.hand(fn); err != nil {
			return rd.progressed, callbackError{err}
		}
		*last = rd.seen
		if dropped != nil {
			return rd.progressed, translate("subscribe", "$all", nil, dropped)
		}
	}
}

// pump turns the subscription's blocking Recv into a channel, so that what
// has arrived can be drained into one batch. Its goroutine ends when the
// subscription drops, which stop causes; stop waits for it.
func pump(sub *kurrentdb.Subscription) (recv <-chan *kurrentdb.SubscriptionEvent, stop func()) {
	ch := make(chan *kurrentdb.SubscriptionEvent, maxBatch)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			ev := sub.Recv()
			select {
			case ch <- ev:
			case <-done:
				return
			}
			if ev.SubscriptionDropped != nil {
				return
			}
		}
	}()
	return ch, func() {
		close(done)
		_ = sub.Close()
		wg.Wait()
	}
}

// reading is where one subscription stands: the batch it is making for
// the subscriber, and the positions that batch is about.
type reading struct {
	filter     events.Filter
	batch      []events.Record
	seen       events.Position // of the last event received
	through    events.Position // how far the subscriber may know the log was read
	reported   events.Position // the through last handed to the subscriber
	progressed bool            // an event arrived
}

// drain starts a batch with ev and adds what else has arrived, up to
// maxBatch records. It returns the error of a drop it met.
func (rd *reading) drain(ev *kurrentdb.SubscriptionEvent, recv <-chan *kurrentdb.SubscriptionEvent) (dropped error) {
	rd.batch = rd.batch[:0]
	for {
		if dropped := rd.add(ev); dropped != nil {
			return dropped
		}
		if len(rd.batch) == maxBatch {
			return nil
		}
		select {
		case ev = <-recv:
		default:
			return nil
		}
	}
}

// add takes one subscription event in: a record into the batch, or a
// position that through reaches. It returns the error of a drop.
func (rd *reading) add(ev *kurrentdb.SubscriptionEvent) (dropped error) {
	switch {
	case ev.SubscriptionDropped != nil:
		if dropped = ev.SubscriptionDropped.Error; dropped == nil {
			dropped = errors.New("subscription dropped")
		}
		return dropped
	case ev.EventAppeared != nil:
		rd.progressed = true
		r := record(ev.EventAppeared)
		if rd.seen.Less(r.Position) {
			rd.seen = r.Position
			if !system(r.Stream, r.Type) && rd.filter.Match(&r) {
				rd.batch = append(rd.batch, r)
			}
		}
	case ev.CheckPointReached != nil:
		// The server read the log this far without a matching event:
		// only through moves, never where a resubscription starts (see
		// Subscribe).
		rd.reach(events.Position{Commit: ev.CheckPointReached.Commit, Prepare: ev.CheckPointReached.Prepare})
	case ev.CaughtUp != nil && ev.CaughtUp.Position != nil:
		rd.reach(events.Position{Commit: ev.CaughtUp.Position.Commit, Prepare: ev.CaughtUp.Position.Prepare})
	}
	return nil
}

// reach moves through up to p.
func (rd *reading) reach(p events.Position) {
	if rd.through.Less(p) {
		rd.through = p
	}
}

// hand gives the batch to fn, with how far the log was read, when there is
// anything new to say.
func (rd *reading) hand(fn events.SubscribeFunc) error {
	rd.reach(rd.seen)
	if len(rd.batch) == 0 && rd.through == rd.reported {
		return nil
	}
	if err := fn(rd.batch, rd.through); err != nil {
		return err
	}
	rd.reported = rd.through
	return nil
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
