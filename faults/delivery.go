package faults

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/projections/due"
)

// Attempter runs one HTTP attempt: the endpoint grain's attempter
// (*attempt.Client satisfies it).
type Attempter interface {
	Do(ctx context.Context, req attempt.Request) attempt.Outcome
}

// Attempter wraps a with kill-after-2xx (the process dies once the Nth
// attempt answered 2xx, before the grain records it), corrupt-body (one
// byte of every Nth attempt's body is changed before it is signed, so the
// receiver verifies the signature of bytes nobody published) and
// skew-sequence (every Nth attempt of an ordered delivery carries a
// webhook-sequence one higher than its own). It returns a itself without
// any of them.
func (s *Set) Attempter(a Attempter) Attempter {
	if s == nil || (s.KillAfter2xx == 0 && s.CorruptBody == 0 && s.SkewSequence == 0) {
		return a
	}
	return &faultyAttempter{a: a, s: s}
}

type faultyAttempter struct {
	a Attempter
	s *Set
}

func (f *faultyAttempter) Do(ctx context.Context, req attempt.Request) attempt.Outcome {
	if n := f.s.CorruptBody; n > 0 && len(req.Payload) > 0 && f.s.count(&f.s.attempts)%n == 0 {
		req.Payload = corrupt(req.Payload)
	}
	if n := f.s.SkewSequence; n > 0 && req.Sequence > 0 && f.s.count(&f.s.sequenced)%n == 0 {
		req.Sequence++
	}
	o := f.a.Do(ctx, req)
	if f.s.KillAfter2xx > 0 && o.Status/100 == 2 && f.s.count(&f.s.successes) == f.s.KillAfter2xx {
		f.s.kill()
	}
	return o
}

// corrupt returns a copy of body with its middle byte changed (the stored
// bytes are left alone).
func corrupt(body []byte) []byte {
	out := append([]byte(nil), body...)
	out[len(out)/2] ^= 0x01
	return out
}

// Puller hands out an endpoint's due work: the endpoint grain's due index
// (*due.Due satisfies it).
type Puller interface {
	Pull(endpointID string, now time.Time, limit int) ([]due.Item, error)
}

// Puller wraps p with duplicate-due: each pull also hands out again what
// the endpoint's previous pull handed out. It returns p itself without
// that fault.
func (s *Set) Puller(p Puller) Puller {
	if s == nil || !s.DuplicateDue {
		return p
	}
	return &duplicatingPuller{p: p, last: map[string][]due.Item{}}
}

type duplicatingPuller struct {
	p    Puller
	mu   sync.Mutex // guards last
	last map[string][]due.Item
}

func (d *duplicatingPuller) Pull(endpointID string, now time.Time, limit int) ([]due.Item, error) {
	items, err := d.p.Pull(endpointID, now, limit)
	if err != nil {
		return items, err
	}
	d.mu.Lock()
	prev := d.last[endpointID]
	d.last[endpointID] = append([]due.Item(nil), items...)
	d.mu.Unlock()
	return append(items, prev...), nil
}

// Waker is told that an endpoint has work due (the due index's waker).
type Waker interface {
	Wake(endpointID string)
}

// Waker wraps w with duplicate-wakes and drop-wakes. It returns w itself
// without them.
func (s *Set) Waker(w Waker) Waker {
	if s == nil || (!s.DuplicateWakes && s.DropWakes == "") {
		return w
	}
	return &faultyWaker{w: w, s: s}
}

// DropsWake reports whether the switch drops the wakes of endpointID
// (drop-wakes): the node then drops its other hints to that endpoint too
// (the deliveries a publish hands its grain), so that its work strands.
func (s *Set) DropsWake(endpointID string) bool {
	return s != nil && s.DropWakes != "" && strings.Contains(endpointID, s.DropWakes)
}

type faultyWaker struct {
	w Waker
	s *Set
}

func (f *faultyWaker) Wake(endpointID string) {
	if f.s.DropsWake(endpointID) {
		return
	}
	f.w.Wake(endpointID)
	if f.s.DuplicateWakes {
		f.w.Wake(endpointID)
	}
}
