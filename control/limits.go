package control

import (
	"context"
	"sync"

	"golang.org/x/sync/semaphore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of the request limits in [Config].
const (
	// DefaultMaxInFlight bounds the calls being served at once, over gRPC
	// and over REST each.
	DefaultMaxInFlight = 512
	// DefaultMaxInFlightPerCaller bounds the calls of one caller (a
	// tenant, whatever key it uses, or the admin) being served at once.
	DefaultMaxInFlightPerCaller = 64
	// DefaultMaxBodyBytesInFlight bounds the REST request bodies held in
	// memory at once, in bytes.
	DefaultMaxBodyBytesInFlight = 256 << 20
	// DefaultMaxMessage is the largest gRPC request message, in bytes: a
	// publish batch and its framing.
	DefaultMaxMessage = 16 << 20
)

// limiter bounds the calls in flight, in total and per caller. Calls over
// a bound are refused at once, never queued: a queue would hold their
// connections and bodies, which is what the bound is for. It is safe for
// concurrent use.
type limiter struct {
	total, perCaller int
	bodies           *semaphore.Weighted // REST body bytes in flight

	mu       sync.Mutex // guards inFlight and byCaller
	inFlight int
	byCaller map[string]int
}

func newLimiter(total, perCaller int, bodyBytes int64) *limiter {
	return &limiter{total: total, perCaller: perCaller, bodies: semaphore.NewWeighted(bodyBytes), byCaller: map[string]int{}}
}

// limitKey names the caller a per-caller bound counts: a tenant's keys
// share one bound.
func limitKey(c Caller) string {
	if c.Admin {
		return "admin"
	}
	return "tenant:" + c.TenantID
}

// acquire admits one call of c, or refuses it with RESOURCE_EXHAUSTED
// (this caller's bound) or UNAVAILABLE (the node's). release must be called
// once when the call ends.
func (l *limiter) acquire(c Caller) (release func(), err error) {
	k := limitKey(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight >= l.total {
		return nil, status.Errorf(codes.Unavailable, "the node is serving %d calls, its limit; retry shortly or on another node", l.total)
	}
	if l.byCaller[k] >= l.perCaller {
		return nil, status.Errorf(codes.ResourceExhausted, "this caller has %d calls in flight, its limit; wait for some to finish", l.perCaller)
	}
	l.inFlight++
	l.byCaller[k]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.inFlight--
			if l.byCaller[k]--; l.byCaller[k] <= 0 {
				delete(l.byCaller, k)
			}
		})
	}, nil
}

// reserveBody reserves n bytes of the REST body budget, or refuses with
// UNAVAILABLE when that many are not free now.
func (l *limiter) reserveBody(n int64) (release func(), err error) {
	if n <= 0 {
		return func() {}, nil
	}
	if !l.bodies.TryAcquire(n) {
		return nil, status.Error(codes.Unavailable, "the node holds as many request bodies as it allows; retry shortly or on another node")
	}
	var once sync.Once
	return func() { once.Do(func() { l.bodies.Release(n) }) }, nil
}

// releaseWith arranges release to run once ctx ends.
func releaseWith(ctx context.Context, release func()) {
	context.AfterFunc(ctx, release)
}
