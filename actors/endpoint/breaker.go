package endpoint

import (
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Breaker defaults.
const (
	DefaultBreakerThreshold = 5
	DefaultBreakerCoolDown  = 5 * time.Second
	DefaultBreakerMaxCool   = 5 * time.Minute
)

// BreakerConfig configures an endpoint's circuit breaker. Zero fields mean
// the defaults: open after 5 consecutive failures, cool down 5 s, doubling
// on each failed probe up to 5 min.
type BreakerConfig struct {
	// Threshold is the weight of consecutive failures that opens the
	// circuit; failures that open it sooner (TLS, DNS, policy refusals)
	// weigh 2, others 1.
	Threshold int
	// CoolDown is the first open period; MaxCoolDown caps its doubling.
	CoolDown    time.Duration
	MaxCoolDown time.Duration
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Threshold <= 0 {
		c.Threshold = DefaultBreakerThreshold
	}
	if c.CoolDown <= 0 {
		c.CoolDown = DefaultBreakerCoolDown
	}
	if c.MaxCoolDown <= 0 {
		c.MaxCoolDown = DefaultBreakerMaxCool
	}
	c.MaxCoolDown = max(c.MaxCoolDown, c.CoolDown)
	return c
}

// Breaker is an endpoint's circuit breaker: closed (attempts flow), open
// (none until a cool-down ends), half-open (exactly one probe). A success
// of the probe closes it; a failure opens it again with twice the
// cool-down. Each transition is returned as the event to append to the
// endpoint stream (CircuitOpened, CircuitHalfOpened, CircuitClosed).
//
// Outcomes count only as answers about the endpoint: a retryable failure
// is a failure; a success and a permanent answer (the receiver is up and
// answering) reset the count. Outcomes of attempts that started before the
// circuit opened are ignored while it is open.
//
// A Breaker is pure (no clock, no I/O) and not safe for concurrent use; the
// grain owns it. Build it with [NewBreaker].
type Breaker struct {
	cfg                  BreakerConfig
	tenantID, endpointID string

	state    controlv1.Endpoint_Circuit
	failures int
	coolDown time.Duration // of the current or last open period
	until    time.Time     // end of the open period
	probing  bool          // half-open: the probe is out
}

// NewBreaker returns the breaker of an endpoint as its state describes it:
// closed, open until the recorded time, or half-open.
func NewBreaker(cfg BreakerConfig, s *State) *Breaker {
	b := &Breaker{cfg: cfg.withDefaults(), tenantID: s.TenantID, endpointID: s.EndpointID, state: controlv1.Endpoint_CIRCUIT_CLOSED}
	switch s.Circuit {
	case controlv1.Endpoint_CIRCUIT_OPEN, controlv1.Endpoint_CIRCUIT_HALF_OPEN:
		b.state, b.until, b.coolDown = s.Circuit, s.CircuitUntil, s.CircuitCoolDown
	}
	return b
}

// State returns the breaker's state.
func (b *Breaker) State() controlv1.Endpoint_Circuit { return b.state }

// Until returns the end of the open period (zero unless open).
func (b *Breaker) Until() time.Time {
	if b.state != controlv1.Endpoint_CIRCUIT_OPEN {
		return time.Time{}
	}
	return b.until
}

// Allow reports whether an attempt may start at now. An open circuit whose
// cool-down has ended turns half-open (ev is CircuitHalfOpened) and lets
// this attempt through as its one probe; the caller hands it back with
// [Breaker.Cancel] if it does not start it after all.
func (b *Breaker) Allow(now time.Time) (ok bool, ev proto.Message) {
	switch b.state {
	case controlv1.Endpoint_CIRCUIT_OPEN:
		if now.Before(b.until) {
			return false, nil
		}
		b.state, b.probing = controlv1.Endpoint_CIRCUIT_HALF_OPEN, true
		return true, &hooklinev1.CircuitHalfOpened{TenantId: b.tenantID, EndpointId: b.endpointID, At: timestamppb.New(now)}
	case controlv1.Endpoint_CIRCUIT_HALF_OPEN:
		if b.probing {
			return false, nil
		}
		b.probing = true
		return true, nil
	}
	return true, nil
}

// Probing reports whether the half-open probe is out.
func (b *Breaker) Probing() bool { return b.state == controlv1.Endpoint_CIRCUIT_HALF_OPEN && b.probing }

// Cancel hands back a probe that Allow let through but that did not start.
func (b *Breaker) Cancel() {
	if b.state == controlv1.Endpoint_CIRCUIT_HALF_OPEN {
		b.probing = false
	}
}

// Succeeded records an answer that shows the endpoint is up (a success or
// a permanent answer). A half-open circuit closes (ev is CircuitClosed).
func (b *Breaker) Succeeded(now time.Time, probe bool) (ev proto.Message) {
	switch b.state {
	case controlv1.Endpoint_CIRCUIT_CLOSED:
		b.failures = 0
	case controlv1.Endpoint_CIRCUIT_HALF_OPEN:
		if !probe {
			return nil
		}
		b.state, b.failures, b.coolDown, b.probing = controlv1.Endpoint_CIRCUIT_CLOSED, 0, 0, false
		return &hooklinev1.CircuitClosed{TenantId: b.tenantID, EndpointId: b.endpointID, At: timestamppb.New(now)}
	}
	return nil
}

// Failed records a retryable failure; sooner doubles its weight. It opens
// a closed circuit at the threshold, and reopens a half-open one after a
// failed probe with twice the cool-down (ev is CircuitOpened).
func (b *Breaker) Failed(now time.Time, sooner bool, class hooklinev1.ErrorClass, probe bool) (ev proto.Message) {
	w := 1
	if sooner {
		w = 2
	}
	switch b.state {
	case controlv1.Endpoint_CIRCUIT_CLOSED:
		b.failures += w
		if b.failures < b.cfg.Threshold {
			return nil
		}
		return b.open(now, b.cfg.CoolDown, class)
	case controlv1.Endpoint_CIRCUIT_HALF_OPEN:
		if !probe {
			return nil
		}
		b.failures += w
		return b.open(now, min(max(2*b.coolDown, b.cfg.CoolDown), b.cfg.MaxCoolDown), class)
	}
	return nil
}

func (b *Breaker) open(now time.Time, coolDown time.Duration, class hooklinev1.ErrorClass) proto.Message {
	b.state, b.coolDown, b.until, b.probing = controlv1.Endpoint_CIRCUIT_OPEN, coolDown, now.Add(coolDown), false
	return &hooklinev1.CircuitOpened{
		TenantId: b.tenantID, EndpointId: b.endpointID, ConsecutiveFailures: int32(b.failures), LastError: class,
		Until: timestamppb.New(b.until), CoolDownMs: coolDown.Milliseconds(), At: timestamppb.New(now),
	}
}
