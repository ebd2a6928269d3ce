package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// readerEvery is how often the reader asks.
const readerEvery = 100 * time.Millisecond

// reader asks the cluster what a customer's dashboard would while its
// members change: every readerEvery, through each node that is up in turn,
// a search of a tenant's deliveries or a GET of a delivery it holds. An
// answer UNAVAILABLE or NOT_FOUND counts in unavailable (the delivery
// exists: it was received); other errors in errs. Its methods are safe
// for concurrent use.
type reader struct {
	b      *Bench
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once

	calls, unavailable, errs atomic.Int64

	mu       sync.Mutex // guards apis, down and examples
	apis     []*API
	down     map[int]bool // nodes being restarted: not asked
	examples []string     // the first unavailable answers, for the notes
}

// maxUnavailableExamples bounds the unavailable answers the reader keeps.
const maxUnavailableExamples = 3

// startReader starts a reader of apis until stop.
func (b *Bench) startReader(ctx context.Context, apis []*API) *reader {
	ctx, cancel := context.WithCancel(ctx)
	r := &reader{b: b, cancel: cancel, done: make(chan struct{}), apis: append([]*API(nil), apis...), down: map[int]bool{}}
	go r.run(ctx)
	return r
}

// setDown says whether node i is being restarted (and is not asked).
func (r *reader) setDown(i int, down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down[i] = down
}

// add asks a new node too.
func (r *reader) add(api *API) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.apis = append(r.apis, api)
}

func (r *reader) stop() {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
}

func (r *reader) run(ctx context.Context) {
	defer close(r.done)
	t := time.NewTicker(readerEvery)
	defer t.Stop()
	var sample []deliveryRef
	for k := 0; ; k++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if k%50 == 0 || len(sample) == 0 {
			sample = r.b.ledger.delivered(r.b.recv, 100)
		}
		if len(sample) == 0 {
			continue
		}
		api := r.target(k)
		if api == nil {
			continue
		}
		d := sample[k%len(sample)]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var err error
		call := "search of " + d.tenant
		if k%2 == 0 {
			err = api.Search(cctx, d.tenant)
		} else {
			call = "GET of " + d.id
			_, err = api.GetDelivery(cctx, d.tenant, d.id)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		r.calls.Add(1)
		switch status.Code(err) {
		case codes.OK:
		case codes.Unavailable, codes.NotFound:
			r.unavailable.Add(1)
			r.mu.Lock()
			if len(r.examples) < maxUnavailableExamples {
				r.examples = append(r.examples, fmt.Sprintf("%s %s through %s: %v", time.Now().Format("15:04:05.000"), call, api.Addr(), err))
			}
			r.mu.Unlock()
		default:
			r.errs.Add(1)
		}
	}
}

// target is the k-th node that is up, round robin (nil when none is).
func (r *reader) target(k int) *API {
	r.mu.Lock()
	defer r.mu.Unlock()
	for j := range r.apis {
		if i := (k + j) % len(r.apis); !r.down[i] {
			return r.apis[i]
		}
	}
	return nil
}

// unavailableExamples returns the first unavailable answers, each with its
// time, call and node.
func (r *reader) unavailableExamples() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.examples...)
}
