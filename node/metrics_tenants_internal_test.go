package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/dispatch"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

func attemptOf(tenant string, at time.Time, quotaMs, slotMs, rateMs int64) *hooklinev1.Attempt {
	return &hooklinev1.Attempt{TenantId: tenant, StartedAt: timestamppb.New(at),
		Waits: &hooklinev1.AttemptWaits{TenantQuotaMs: quotaMs, SlotMs: slotMs, RateLimitMs: rateMs}}
}

// TestThrottles: what held each tenant back over the last minute, the
// tenants held back most first, at most maxThrottled of them.
func TestThrottles(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC) // a minute's start
	th := newThrottles()
	th.record(attemptOf("acme", t0.Add(10*time.Second), 2000, 0, 500), t0.Add(10*time.Second))
	th.record(attemptOf("acme", t0.Add(20*time.Second), 1000, 0, 0), t0.Add(20*time.Second))
	th.record(attemptOf("calm", t0.Add(20*time.Second), 0, 0, 0), t0.Add(20*time.Second))      // waited for nothing
	th.record(attemptOf("old", t0.Add(-5*time.Minute), 9000, 0, 0), t0.Add(20*time.Second))    // a catch-up: too old
	th.record(attemptOf("globex", t0.Add(30*time.Second), 0, 4000, 0), t0.Add(30*time.Second)) // slots
	live := []dispatch.TenantStats{{TenantID: "globex", Held: 3, AtCap: true, Waiting: [2]int{7, 1}}, {TenantID: "queued", Waiting: [2]int{2, 0}}}

	want := []*controlv1.TenantThrottle{
		{TenantId: "globex", SlotSeconds: 4, Waiting: 8, AtCap: true},
		{TenantId: "acme", QuotaSeconds: 3, RateLimitSeconds: 0.5},
		{TenantId: "queued", Waiting: 2},
	}
	if diff := cmp.Diff(want, th.top(t0.Add(40*time.Second), live), protocmp.Transform()); diff != "" {
		t.Errorf("within the minute (-want +got):\n%s", diff)
	}
	// Half a minute into the next one, half of the previous minute counts.
	want = []*controlv1.TenantThrottle{
		{TenantId: "globex", SlotSeconds: 2},
		{TenantId: "acme", QuotaSeconds: 1.5, RateLimitSeconds: 0.25},
	}
	if diff := cmp.Diff(want, th.top(t0.Add(90*time.Second), nil), protocmp.Transform()); diff != "" {
		t.Errorf("half a minute on (-want +got):\n%s", diff)
	}
	if got := th.top(t0.Add(3*time.Minute), nil); len(got) != 0 {
		t.Errorf("minutes on: %v, want nobody", got)
	}
	if n := len(th.byTenant); n != 0 {
		t.Errorf("%d tenants remembered minutes on, want none", n)
	}
	for i := range 3 * maxThrottled {
		th.record(attemptOf(fmt.Sprint("t", i), t0.Add(5*time.Minute), int64(i+1), 0, 0), t0.Add(5*time.Minute))
	}
	got := th.top(t0.Add(5*time.Minute), nil)
	if len(got) != maxThrottled || got[0].GetTenantId() != fmt.Sprint("t", 3*maxThrottled-1) {
		t.Errorf("%d tenants listed, the first %s; want %d, the one held back most first", len(got), got[0].GetTenantId(), maxThrottled)
	}
}
