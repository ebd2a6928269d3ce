package endpoint_test

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/hookline/hookline/events"
)

// faultLog wraps the test's log at the storage boundary to do what a real
// backend may do: hold the appends to some streams (a slow or stuck
// write), hold the projections' subscription at a position (a runner that
// lags), and answer reads of some streams "not found" a few times (a
// follower that lags behind its leader). Safe for concurrent use.
type faultLog struct {
	events.Log
	mu         sync.Mutex // guards the fields below
	holdPrefix string     // streams whose appends wait for appendGate
	appendGate chan struct{}
	upTo       *events.Position // the subscription delivers records up to it; nil: all
	moved      chan struct{}    // closed when upTo changes
	missing    map[string]int   // stream → reads still answered not found
	reads      map[string]int   // stream → reads
}

func newFaultLog(l events.Log) *faultLog {
	return &faultLog{Log: l, moved: make(chan struct{}), missing: map[string]int{}, reads: map[string]int{}}
}

// holdAppends makes appends to streams starting with prefix wait until
// releaseAppends.
func (l *faultLog) holdAppends(prefix string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.holdPrefix, l.appendGate = prefix, make(chan struct{})
}

func (l *faultLog) releaseAppends() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.appendGate != nil {
		close(l.appendGate)
		l.appendGate = nil
	}
}

// holdSubscription lets subscribers see records up to pos only; nil
// lets them see everything again.
func (l *faultLog) holdSubscription(pos *events.Position) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.upTo = pos
	close(l.moved)
	l.moved = make(chan struct{})
}

// readsOf returns how many times stream was read.
func (l *faultLog) readsOf(stream string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads[stream]
}

// missReads answers the next n reads of stream "not found".
func (l *faultLog) missReads(stream string, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.missing[stream] = n
}

func (l *faultLog) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	l.mu.Lock()
	gate, prefix := l.appendGate, l.holdPrefix
	l.mu.Unlock()
	if gate != nil && strings.HasPrefix(stream, prefix) {
		select {
		case <-gate:
		case <-ctx.Done():
			return events.AppendResult{}, ctx.Err()
		}
	}
	return l.Log.Append(ctx, stream, expected, evs...)
}

func (l *faultLog) ReadStream(ctx context.Context, stream string, dir events.Direction, from events.Revision, max int) ([]events.Record, error) {
	l.mu.Lock()
	l.reads[stream]++
	miss := l.missing[stream] > 0
	if miss {
		l.missing[stream]--
	}
	l.mu.Unlock()
	if miss {
		return nil, fmt.Errorf("read %s: %w", stream, events.ErrStreamNotFound)
	}
	return l.Log.ReadStream(ctx, stream, dir, from, max)
}

func (l *faultLog) Subscribe(ctx context.Context, from events.Position, filter events.Filter, fn events.SubscribeFunc) error {
	return l.Log.Subscribe(ctx, from, filter, func(recs []events.Record, through events.Position) error {
		for {
			l.mu.Lock()
			upTo, moved := l.upTo, l.moved
			l.mu.Unlock()
			if upTo == nil || !upTo.Less(through) {
				return fn(recs, through)
			}
			// Held at upTo: hand over what lies before it, and claim no
			// progress past it.
			n := 0
			for n < len(recs) && !upTo.Less(recs[n].Position) {
				n++
			}
			if n > 0 {
				if err := fn(recs[:n], recs[n-1].Position); err != nil {
					return err
				}
				recs = recs[n:]
				continue
			}
			select {
			case <-moved:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
}
