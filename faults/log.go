package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/pause"
)

// Log wraps l with the log's faults of s (slow-append, unknown-every,
// kill-in-plan); it returns l itself when s injects none of them.
func (s *Set) Log(l events.Log) events.Log {
	if s == nil || (s.SlowAppend == 0 && s.UnknownEvery == 0 && s.KillInPlan == 0) {
		return l
	}
	return &faultyLog{Log: l, s: s}
}

type faultyLog struct {
	events.Log
	s *Set
}

func (f *faultyLog) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	s := f.s
	if s.SlowAppend > 0 {
		if err := pause.For(ctx, s.SlowAppend); err != nil {
			return events.AppendResult{}, err
		}
	}
	if s.KillInPlan > 0 && multiChunk(evs) && s.count(&s.plans) == s.KillInPlan {
		// Die somewhere around the append: before it starts, while its
		// batch is written, or just after it landed.
		go func() {
			time.Sleep(time.Duration(rand.Int64N(int64(2 * time.Millisecond))))
			s.kill()
		}()
	}
	res, err := f.Log.Append(ctx, stream, expected, evs...)
	if err == nil && s.UnknownEvery > 0 && s.count(&s.appends)%s.UnknownEvery == 0 {
		return events.AppendResult{}, fmt.Errorf("append %s: %w: %w", stream, ErrUnknownOutcome, context.DeadlineExceeded)
	}
	return res, err
}

// multiChunk reports whether evs are a plan of two chunks or more.
func multiChunk(evs []events.Event) bool {
	n := 0
	for _, e := range evs {
		if e.Type == "DeliveriesPlanned" {
			n++
		}
	}
	return n > 1
}

// ProjectionsLog wraps the log the node's projections read with hide (the
// Nth distinct record of HideType they are handed is dropped until they
// applied a batch without it, so they diverge from the log) and
// lag-projections (each batch is held back until its records are
// LagProjections old). It returns l itself without either.
func (s *Set) ProjectionsLog(l events.Log) events.Log {
	if s == nil || (s.HideNth == 0 && s.LagProjections == 0) {
		return l
	}
	return &hidingLog{Log: l, s: s}
}

type hidingLog struct {
	events.Log
	s *Set
}

func (h *hidingLog) Subscribe(ctx context.Context, from events.Position, filter events.Filter, fn events.SubscribeFunc) error {
	s := h.s
	return h.Log.Subscribe(ctx, from, filter, func(recs []events.Record, through events.Position) error {
		if s.LagProjections > 0 && len(recs) > 0 {
			// Apply no record before it is LagProjections old.
			if wait := time.Until(recs[len(recs)-1].Recorded.Add(s.LagProjections)); wait > 0 {
				if err := pause.For(ctx, wait); err != nil {
					return err
				}
			}
		}
		for i := range recs {
			if recs[i].Type == s.HideType && s.hides(recs[i].Position) {
				out := append(append([]events.Record{}, recs[:i]...), recs[i+1:]...)
				err := fn(out, through)
				s.hideTook(err == nil)
				return err
			}
		}
		return fn(recs, through)
	})
}

// hides reports whether the HideType record at pos is to be hidden: the
// HideNth distinct one handed to the projections, until a batch without it
// has been applied. A lane that restarts (partitions moved, a batch left
// unapplied) is handed records again: each counts once, and the hidden one
// is hidden again until the projections took a batch without it. After
// that it is handed as it is (a rebuild of the projections heals them).
func (s *Set) hides(pos events.Position) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hiddenAt != nil {
		return !s.hideDone && *s.hiddenAt == pos
	}
	if s.counted[pos] {
		return false
	}
	if s.counted == nil {
		s.counted = map[events.Position]bool{}
	}
	s.counted[pos] = true
	if s.hidden++; s.hidden == s.HideNth {
		s.hiddenAt, s.counted = &pos, nil
		return true
	}
	return false
}

// hideTook records whether the batch the hidden record was taken out of was
// applied.
func (s *Set) hideTook(applied bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hideDone = s.hideDone || applied
}
