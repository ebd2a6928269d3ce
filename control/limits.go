package control

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Defaults of the request limits in [Config].
const (
	// DefaultMaxInFlight bounds the calls being served at once, over gRPC
	// and over REST each.
	DefaultMaxInFlight = 512
	// DefaultMaxInFlightPerCaller bounds the calls of one caller (a
	// tenant, whatever key or portal token it uses, or the admin) being
	// served at once.
	DefaultMaxInFlightPerCaller = 64
	// DefaultMaxBodyBytesInFlight bounds the REST request bodies held in
	// memory at once, in bytes.
	DefaultMaxBodyBytesInFlight = 256 << 20
	// DefaultMaxMessage is the largest gRPC request message, in bytes: a
	// publish batch and its framing.
	DefaultMaxMessage = 16 << 20
	// DefaultMaxPlanned caps the deliveries one publish plans: ten times
	// a tenant's default endpoint quota.
	DefaultMaxPlanned = 10_000
)

// maxAuthenticating bounds the calls being authenticated at once, over
// gRPC and over REST each: the work done for callers not known yet, which
// no per-caller limit covers. A lookup is one local read, so only a flood
// reaches it; a call over it is refused with UNAVAILABLE before its token
// is looked at.
const maxAuthenticating = 32

// limiter bounds the calls in flight, in total and per caller. Calls over
// a bound are refused at once, never queued: a queue would hold their
// connections and bodies, which is what the bound is for. It is safe for
// concurrent use.
type limiter struct {
	total, perCaller int
	bodies           *semaphore.Weighted // REST body bytes in flight
	authenticating   *semaphore.Weighted // calls whose caller is being looked up

	mu       sync.Mutex // guards inFlight and byCaller
	inFlight int
	byCaller map[string]int
}

func newLimiter(total, perCaller int, bodyBytes int64) *limiter {
	return &limiter{
		total: total, perCaller: perCaller, byCaller: map[string]int{},
		bodies: semaphore.NewWeighted(bodyBytes), authenticating: semaphore.NewWeighted(maxAuthenticating),
	}
}

// authenticate runs lookup, which finds a call's caller, under the bound
// of calls being authenticated at once, or refuses the call with
// UNAVAILABLE when the bound is reached.
func (l *limiter) authenticate(lookup func() (Caller, error)) (Caller, error) {
	if !l.authenticating.TryAcquire(1) {
		return Caller{}, status.Error(codes.Unavailable, "the node is authenticating as many calls as it allows; retry shortly or on another node")
	}
	defer l.authenticating.Release(1)
	return lookup()
}

// limitKey names the caller a per-caller bound counts: a tenant's keys
// share one bound.
func limitKey(c Caller) string {
	if c.Admin {
		return "admin"
	}
	return "tenant:" + c.TenantID
}

// acquire admits one call of c, or refuses it with RESOURCE_EXHAUSTED and
// a RetryInfo (this caller's bound, see overLimit) or UNAVAILABLE (the
// node's). release must be called
// once when the call ends.
func (l *limiter) acquire(c Caller) (release func(), err error) {
	k := limitKey(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight >= l.total {
		return nil, status.Errorf(codes.Unavailable, "the node is serving %d calls, its limit; retry shortly or on another node", l.total)
	}
	if l.byCaller[k] >= l.perCaller {
		return nil, overLimit(fmt.Sprintf("this caller has %d calls in flight, its limit; wait for some to finish", l.perCaller))
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

// limitRetryDelay is the wait a refusal for a limit of calls in flight
// advises: such a slot frees when one of the caller's calls ends.
const limitRetryDelay = 50 * time.Millisecond

// overLimit is the refusal of a call over its caller's limit:
// RESOURCE_EXHAUSTED with a RetryInfo, which tells it apart from a message
// over a size limit (RESOURCE_EXHAUSTED alone, which gRPC itself sends).
// Nothing was done: a client retries it after a backoff, and never splits
// a batch for it.
func overLimit(msg string) error {
	st, err := status.New(codes.ResourceExhausted, msg).WithDetails(
		&errdetails.RetryInfo{RetryDelay: durationpb.New(limitRetryDelay)},
		&errdetails.ErrorInfo{Reason: "CALLS_IN_FLIGHT", Domain: "hookline"},
	)
	if err != nil {
		return status.Error(codes.ResourceExhausted, msg) // cannot happen: the details marshal
	}
	return st.Err()
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

// A call's slot is taken by the tap and given back as soon as its handler
// returns, before its answer is sent (releaseSlot, from the unary
// interceptor): a caller that sends its next call when an answer arrives
// finds the slot free, so a caller that keeps N calls in flight is never
// refused by a limit of N. A call that never reaches a handler (its
// message refused, a stream) gives it back when its context ends.

type slotKey struct{}

// withSlot arranges release to run once ctx ends, and puts it in the
// returned context for releaseSlot.
func withSlot(ctx context.Context, release func()) context.Context {
	context.AfterFunc(ctx, release)
	return context.WithValue(ctx, slotKey{}, release)
}

// releaseSlot gives back the slot of the call of ctx, if it holds one.
func releaseSlot(ctx context.Context) {
	if release, ok := ctx.Value(slotKey{}).(func()); ok {
		release()
	}
}
