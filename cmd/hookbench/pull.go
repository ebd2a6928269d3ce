package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Pull consumers: for a tenant whose endpoints are pulled, one consumer
// per endpoint leases its deliveries, hands each to the receiver (which
// checks its signature and records it, as it would a request) and
// acknowledges those whose signature held.

// consume runs a consumer for every endpoint of ts until ctx ends.
func (b *Bench) consume(ctx context.Context, ts []*Tenant) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, t := range ts {
		for id, name := range t.names {
			wg.Go(func() { b.consumeOne(ctx, t.ID, id, name) })
		}
	}
	return &wg
}

func (b *Bench) consumeOne(ctx context.Context, tenant, id, name string) {
	for ctx.Err() == nil {
		r, err := b.pullOnce(ctx, b.api, tenant, id, name)
		if err != nil && ctx.Err() == nil {
			fmt.Fprintf(b.stderr, "hookbench: %s %s: %v\n", r.failed, name, err)
			if r.failed == "pull" {
				_ = sleepCtx(ctx, 100*time.Millisecond)
			}
		}
	}
}

// pulled is one round of a pull consumer: the messages it leased, when the
// pull was answered, which of them it acknowledged and when the
// acknowledgement was answered.
type pulled struct {
	msgs        []*controlv1.PulledMessage
	at, ackedAt time.Time
	acked       map[string]bool
	bad         map[string]bool // the messages whose signature did not hold
	failed      string          // the call that failed: "pull" or "ack" ("" none)
}

// pullOnce leases up to 100 of the endpoint's deliveries through api
// (waiting a second for them), hands each to the receiver under the
// endpoint's name, which checks its signature and records it as it would
// a request, and acknowledges those whose signature held. An ack that
// fails leaves them to be offered again when their lease ends.
func (b *Bench) pullOnce(ctx context.Context, api *API, tenant, id, name string) (pulled, error) {
	cc, _, _ := api.conn()
	cl := controlv1.NewEndpointServiceClient(cc)
	c, cancel := api.ctx(ctx)
	res, err := cl.PullDeliveries(c, &controlv1.PullDeliveriesRequest{TenantId: tenant, EndpointId: id, Max: 100, LeaseSeconds: 30, WaitSeconds: 1})
	cancel()
	r := pulled{at: time.Now(), acked: map[string]bool{}, bad: map[string]bool{}}
	if err != nil {
		r.failed = "pull"
		return r, err
	}
	r.msgs = res.GetMessages()
	var ids []string
	for _, m := range r.msgs {
		if b.recv.Take(name, headerOf(m.GetHeaders()), m.GetBody()) {
			ids = append(ids, m.GetDeliveryId())
		} else {
			r.bad[m.GetDeliveryId()] = true
		}
	}
	if len(ids) == 0 {
		return r, nil
	}
	c, cancel = api.ctx(ctx)
	ack, err := cl.AckDeliveries(c, &controlv1.AckDeliveriesRequest{TenantId: tenant, EndpointId: id, DeliveryIds: ids})
	cancel()
	r.ackedAt = time.Now()
	if err != nil {
		r.failed = "ack"
		return r, fmt.Errorf("%w (they are offered again when their lease ends)", err)
	}
	for _, id := range ids {
		r.acked[id] = true
	}
	for _, id := range ack.GetNotAcked() {
		delete(r.acked, id)
	}
	return r, nil
}

// headerOf is a pulled message's headers as a request's.
func headerOf(m map[string]string) http.Header {
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v)
	}
	return h
}

// pullVsPush runs the throughput load to push endpoints, then to pull
// endpoints drained by one consumer each, in one run.
func pullVsPush(ctx context.Context, b *Bench) (Summary, error) {
	ts, err := b.makeTenants(ctx, "s")
	if err != nil {
		return Summary{}, err
	}
	fmt.Fprintf(b.stderr, "hookbench: phase 1: push endpoints for %v\n", b.cfg.Duration)
	push, err := b.publishAndAwait(ctx, "pull", b.load(ts, 0, b.cfg.Duration, 1))
	if err != nil {
		return push, err
	}
	b.pullEndpoints = true
	if ts, err = b.makeTenants(ctx, "p"); err != nil {
		return push, err
	}
	cctx, stop := context.WithCancel(ctx)
	consumers := b.consume(cctx, ts)
	fmt.Fprintf(b.stderr, "hookbench: phase 2: pull endpoints, one consumer each, for %v\n", b.cfg.Duration)
	pulled, err := b.publishAndAwait(ctx, "pull", b.load(ts, 0, b.cfg.Duration, 2))
	stop()
	consumers.Wait()
	pulled.setCounts(b.Summarize("pull", time.Time{}, 1, 2))
	addExtra(&pulled, map[string]float64{
		"push_deliveries_per_sec":   push.DeliveriesPerSec,
		"push_first_attempt_p99_ms": push.FirstAttemptP99,
	})
	if push.DeliveriesPerSec > 0 {
		pulled.Extra["pull_to_push"] = round(pulled.DeliveriesPerSec/push.DeliveriesPerSec, 3)
	}
	pulled.Notes = append(pulled.Notes, "deliveries_per_sec and first_attempt_* are the pull phase's (first_attempt: to the consumer's pull); the counts and checks cover both phases")
	return pulled, err
}
