package main

import (
	"context"
	"sync"
	"time"
)

// monitor samples the nodes' queue ages (the oldest new delivery's, the
// most overdue retry's: the highest over the nodes) twice a second while a
// fault runs and after it. It is safe for concurrent use.
type monitor struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex // guards samples
	samples []ageSample
}

type ageSample struct {
	at           time.Time
	newS, retryS float64
	ok           bool // some node answered
}

// monitorEvery is the sampling interval.
const monitorEvery = 500 * time.Millisecond

func (a *acceptance) monitor(ctx context.Context) *monitor {
	ctx, cancel := context.WithCancel(ctx)
	m := &monitor{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		t := time.NewTicker(monitorEvery)
		defer t.Stop()
		for {
			s := ageSample{at: time.Now()}
			for _, n := range a.nodes {
				mctx, cancel := context.WithTimeout(ctx, time.Second)
				nv, ok1, err1 := n.Metric(mctx, "hookline_due_oldest_new_seconds")
				rv, ok2, err2 := n.Metric(mctx, "hookline_due_oldest_retry_seconds")
				cancel()
				if err1 == nil && err2 == nil && ok1 && ok2 {
					s.ok = true
					s.newS, s.retryS = max(s.newS, nv), max(s.retryS, rv)
				}
			}
			m.mu.Lock()
			m.samples = append(m.samples, s)
			m.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *monitor) stop() {
	m.cancel()
	<-m.done
}

// maxDuring returns the highest ages sampled in [from, to].
func (m *monitor) maxDuring(from, to time.Time) (newS, retryS float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range m.samples {
		if s.ok && !s.at.Before(from) && !s.at.After(to) {
			newS, retryS = max(newS, s.newS), max(retryS, s.retryS)
		}
	}
	return round(newS, 1), round(retryS, 1)
}

// recovered waits until a sample taken after from shows both ages under
// the objective, and returns how long after from that was (timeout when
// none does within it).
func (m *monitor) recovered(ctx context.Context, from time.Time, timeout time.Duration) (time.Duration, error) {
	deadline := from.Add(timeout)
	for {
		m.mu.Lock()
		for _, s := range m.samples {
			if s.ok && !s.at.Before(from) && s.newS < queueObjective.Seconds() && s.retryS < queueObjective.Seconds() {
				m.mu.Unlock()
				return s.at.Sub(from), nil
			}
		}
		m.mu.Unlock()
		if time.Now().After(deadline) {
			return timeout, nil
		}
		if err := sleepCtx(ctx, monitorEvery); err != nil {
			return 0, err
		}
	}
}
