package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Load is one publishing phase.
type Load struct {
	Tenants []*Tenant
	// Rate is events per second over all publishers; 0 means as fast as
	// the node accepts.
	Rate       float64
	Duration   time.Duration
	Publishers int
	Batch      int
	Payload    int
	Phase      int
	// MaxBacklog pauses publishing while more awaited deliveries are
	// planned than received; 0 means no bound.
	MaxBacklog int64
	// Keys, above 0, gives each event an ordering key: each publisher
	// takes Keys/Publishers keys of its own, in turn, so that a key is
	// published by one publisher, once per batch, one batch after another.
	Keys int
	// Retry retries a failed batch (same event ids, so idempotent) until it
	// is accepted: for runs where the node is killed.
	Retry bool
	// APIs, when set, are the nodes of a cluster: batches go to them round
	// robin, and a failed batch is retried on the next node at once (with
	// Retry). Empty means the Bench's own API.
	APIs []*API
	// Twice publishes every batch again once accepted, as a producer whose
	// relay died after publishing would: every event of the second must be
	// answered as a duplicate with the first's deliveries
	// (Bench.republished, Bench.republishDiffer).
	Twice bool
	// Events, when above 0, ends publishing once that many events were
	// accepted, before Duration if need be.
	Events int64
	// Until, when set, ends publishing once it is closed: the batches
	// under way are answered first, so that the bench knows every event
	// the node took (cancelling a call instead would leave events the
	// node took and the ledger never saw).
	Until <-chan struct{}
}

// Publish runs a load to its end and returns the events accepted.
func (b *Bench) Publish(ctx context.Context, l Load) (int64, error) {
	if b.cfg.FailKey > 0 && l.Keys > 0 {
		b.failKeyOnce.Do(func() { b.recv.FailKey(failingKey, time.Now().Add(b.cfg.FailKey)) })
	}
	l.Publishers = max(l.Publishers, 1)
	l.Batch = min(max(l.Batch, 1), 100)
	start := time.Now()
	end := start.Add(l.Duration)
	var accepted, reserved atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	// waits end with the load: at its context's end or at Until.
	waits, stopWaits := context.WithCancel(gctx)
	defer stopWaits()
	if l.Until != nil {
		go func() {
			select {
			case <-l.Until:
				stopWaits()
			case <-waits.Done():
			}
		}()
	}
	for p := range l.Publishers {
		g.Go(func() error {
			var sent int64
			for k := 0; ; k++ {
				now := time.Now()
				if !now.Before(end) || waits.Err() != nil {
					return nil
				}
				n := int64(l.Batch)
				if l.Rate > 0 {
					perPub := l.Rate / float64(l.Publishers)
					due := int64(now.Sub(start).Seconds()*perPub) + 1
					if n = min(n, due-sent); n <= 0 {
						next := start.Add(time.Duration(float64(sent) / perPub * float64(time.Second)))
						if err := sleepCtx(waits, min(next.Sub(now), end.Sub(now))); err != nil {
							return nil
						}
						continue
					}
				}
				if l.MaxBacklog > 0 && b.backlog() > l.MaxBacklog {
					if err := sleepCtx(waits, 20*time.Millisecond); err != nil {
						return nil
					}
					continue
				}
				if l.Events > 0 {
					if n = min(n, l.Events-reserved.Add(n)+n); n <= 0 {
						return nil
					}
				}
				t := l.Tenants[(p+k)%len(l.Tenants)]
				evs := make([]*controlv1.PublishRequest, n)
				for i := range evs {
					id := fmt.Sprintf("%s-p%d-%d-%d", b.runID, l.Phase, p, sent+int64(i))
					evs[i] = &controlv1.PublishRequest{EventId: id, Type: t.Types[rand.IntN(len(t.Types))],
						Payload: Payload(l.Payload, id), OccurredAt: timestamppb.New(now)}
					if per := int64(l.Keys / max(l.Publishers, 1)); per > 0 {
						evs[i].OrderingKey = fmt.Sprintf("p%d-k%d", p, (sent+int64(i))%per)
					}
				}
				if err := b.publishBatch(gctx, t, evs, l); err != nil {
					return err
				}
				sent += n
				accepted.Add(n)
			}
		})
	}
	err := g.Wait()
	return accepted.Load(), err
}

func (b *Bench) publishBatch(ctx context.Context, t *Tenant, evs []*controlv1.PublishRequest, l Load) error {
	if len(l.APIs) > 0 {
		return b.publishRoundRobin(ctx, t, evs, l)
	}
	const maxTries = 600 // with the waits below: several minutes of node restarts
	for try := 0; ; try++ {
		_, _, next := b.api.conn()
		began := time.Now()
		resps, err := b.api.PublishBatch(ctx, t.ID, evs)
		if err == nil {
			b.record(t, evs, resps, began, time.Now(), l.Phase)
			if l.Twice {
				return b.publishAgain(ctx, t, evs, resps, l)
			}
			return nil
		}
		if !l.Retry || try >= maxTries || ctx.Err() != nil {
			return err
		}
		// The node is down: wait for it to come back (or a short while).
		tm := time.NewTimer(250 * time.Millisecond)
		select {
		case <-next:
		case <-tm.C:
		case <-ctx.Done():
		}
		tm.Stop()
	}
}

// record enters an accepted batch in the ledger and the publish figures.
func (b *Bench) record(t *Tenant, evs []*controlv1.PublishRequest, resps []*controlv1.PublishResponse, began, ack time.Time, phase int) {
	b.ledger.record(t, evs, resps, began, ack, phase)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.firstAck.IsZero() {
		b.firstAck = ack
	}
	b.publishLat[phase] = append(b.publishLat[phase], ack.Sub(began))
	b.events += int64(len(resps))
}

// slowestPublish returns the longest PublishBatch call answered in phase.
func (b *Bench) slowestPublish(phase int) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var d time.Duration
	for _, l := range b.publishLat[phase] {
		d = max(d, l)
	}
	return d
}

// publishRoundRobin sends a batch to the next node of l.APIs and, when that
// fails and l.Retry is set, to the node after it at once with the same
// event ids (so the retry is idempotent), pausing only after a full round
// failed.
func (b *Bench) publishRoundRobin(ctx context.Context, t *Tenant, evs []*controlv1.PublishRequest, l Load) error {
	const maxRounds = 600 // with the pause below: minutes with no node answering
	first := int(b.rr.Add(1))
	for try := 0; try < maxRounds*len(l.APIs); try++ {
		api := l.APIs[(first+try)%len(l.APIs)]
		began := time.Now()
		resps, err := api.PublishBatch(ctx, t.ID, evs)
		if err == nil {
			b.record(t, evs, resps, began, time.Now(), l.Phase)
			b.ledger.answeredBy(t, evs, api.Addr())
			if l.Twice {
				return b.publishAgain(ctx, t, evs, resps, l)
			}
			return nil
		}
		if !l.Retry || ctx.Err() != nil {
			return err
		}
		b.retries.Add(1)
		if (try+1)%len(l.APIs) == 0 {
			if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return fmt.Errorf("publish %d events of %s: no node accepted them in %d rounds", len(evs), t.ID, maxRounds)
}

// publishAgain publishes an accepted batch again (Load.Twice) and checks
// that every event is answered as a duplicate planning the same
// deliveries as the first answer.
func (b *Bench) publishAgain(ctx context.Context, t *Tenant, evs []*controlv1.PublishRequest, first []*controlv1.PublishResponse, l Load) error {
	l.Twice = false
	for try := 0; ; try++ {
		api := b.api
		if len(l.APIs) > 0 {
			api = l.APIs[(int(b.rr.Add(1))+try)%len(l.APIs)]
		}
		again, err := api.PublishBatch(ctx, t.ID, evs)
		if err != nil {
			if !l.Retry || try >= 600 || ctx.Err() != nil {
				return err
			}
			if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		for i, r := range again {
			b.republished.Add(1)
			if !r.GetDuplicate() || !sameDeliveries(r, first[i]) {
				b.republishDiffer.Add(1)
			}
		}
		return nil
	}
}

func sameDeliveries(a, b *controlv1.PublishResponse) bool {
	ids := map[string]bool{}
	for _, d := range a.GetDeliveries() {
		ids[d.GetDeliveryId()] = true
	}
	if len(ids) != len(b.GetDeliveries()) {
		return false
	}
	for _, d := range b.GetDeliveries() {
		if !ids[d.GetDeliveryId()] {
			return false
		}
	}
	return true
}
