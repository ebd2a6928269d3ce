package endpoint

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestWaitOf: what a grain answers for a pending delivery, from what it
// holds: a ready flight waits for the limit that holds the endpoint (its
// in-flight limit, the tenant's quota, the breaker, the rate limit, or a
// node slot), or for a pull on a pull endpoint; a leased one for its
// lease; one not held for the endpoint's pause or open circuit, else its
// schedule.
func TestWaitOf(t *testing.T) {
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	live := func() *State {
		return &State{Created: true, TenantID: "t", Status: controlv1.Endpoint_STATUS_ACTIVE, Config: &hooklinev1.EndpointConfig{},
			Circuit: controlv1.Endpoint_CIRCUIT_CLOSED}
	}
	grainWith := func(s *State, hold holdReason, f *flight) *grain {
		l := &loop{cfg: &Config{MaxInFlight: 4}, state: s, flights: map[string]*flight{}, holds: holds{reason: hold}}
		if f != nil {
			l.flights["dlv_1"] = f
		}
		return &grain{id: "ep_1", state: s, loop: l}
	}
	breaker := func(s *State) *Breaker {
		b := NewBreaker(BreakerConfig{}, s)
		b.open(now.Add(-time.Second), 30*time.Second, hooklinev1.ErrorClass_ERROR_CLASS_TIMEOUT)
		return b
	}
	later := timestamppb.New(now.Add(time.Minute))
	for _, tc := range []struct {
		name       string
		g          func() *grain
		next       *timestamppb.Timestamp
		reason     string
		detail     string
		wantsUntil bool
	}{
		{"in flight", func() *grain { return grainWith(live(), holdInFlight, &flight{stage: stageReady}) }, nil, "in_flight", "4 attempts in flight", false},
		{"quota", func() *grain { return grainWith(live(), holdQuota, &flight{stage: stageReady}) }, nil, "quota", "tenant's quota", false},
		{"rate", func() *grain { return grainWith(live(), holdRate, &flight{stage: stageReady}) }, nil, "rate_limit", "rate limit", false},
		{"slot", func() *grain { return grainWith(live(), holdNone, &flight{stage: stageReady}) }, nil, "slot", "attempt slots", false},
		{"breaker", func() *grain {
			g := grainWith(live(), holdBreaker, &flight{stage: stageReady})
			g.loop.breaker = breaker(g.state)
			return g
		}, nil, "circuit_open", "circuit breaker is open", true},
		{"pull", func() *grain {
			s := live()
			s.Config.Pull = true
			return grainWith(s, holdNone, &flight{stage: stageReady})
		}, nil, "pull", "hookline endpoints pull --id ep_1", false},
		{"leased", func() *grain {
			return grainWith(live(), holdNone, &flight{stage: stageLeased, leasedUntil: now.Add(time.Minute)})
		}, nil, "leased", "consumer", true},
		{"attempting", func() *grain { return grainWith(live(), holdNone, &flight{stage: stageRunning}) }, nil, "attempting", "out now", false},
		{"paused", func() *grain {
			s := live()
			s.Status = controlv1.Endpoint_STATUS_PAUSED
			return grainWith(s, holdNone, nil)
		}, later, "paused", "hookline endpoints resume --id ep_1", false},
		{"circuit open, not held", func() *grain {
			s := live()
			s.Circuit, s.CircuitUntil = controlv1.Endpoint_CIRCUIT_OPEN, now.Add(20*time.Second)
			return grainWith(s, holdNone, nil)
		}, nil, "circuit_open", "cool-down", true},
		{"backoff", func() *grain { return grainWith(live(), holdNone, nil) }, later, "backoff", "scheduled", true},
		{"due", func() *grain { return grainWith(live(), holdNone, nil) }, nil, "due", "shortly", false},
		{"pull, not held", func() *grain {
			s := live()
			s.Config.Pull = true
			return grainWith(s, holdNone, nil)
		}, nil, "pull", "consumer to pull it", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.g()
			w := g.waitOf("dlv_1", now)
			if w == nil {
				w = g.scheduledWait(&internalv1.WaitQuery{DeliveryId: "dlv_1", NextAttemptAt: tc.next}, now)
			}
			if w.GetReason() != tc.reason || !strings.Contains(w.GetDetail(), tc.detail) || (w.GetUntil() != nil) != tc.wantsUntil {
				t.Errorf("wait %v; want reason %s, a detail with %q, until set %v", w, tc.reason, tc.detail, tc.wantsUntil)
			}
		})
	}
}
