package tenant_test

import (
	"testing"
	"time"

	"github.com/hookline/hookline/actors/tenant"
)

func TestLeases(t *testing.T) {
	type ask struct {
		at       time.Duration
		endpoint string
		attempts int32
		inFlight int32
		want     tenant.Grant // Expires is checked as at+1s
	}
	tests := []struct {
		name     string
		rate     float64
		inFlight int32
		asks     []ask
	}{
		{name: "alone gets what it wants", rate: 100, inFlight: 10, asks: []ask{
			{0, "a", 30, 5, tenant.Grant{Attempts: 30, InFlight: 5}},
		}},
		{name: "alone is capped by the budget", rate: 100, inFlight: 10, asks: []ask{
			{0, "a", 500, 50, tenant.Grant{Attempts: 100, InFlight: 10}},
		}},
		{name: "newcomer waits for the first lease to expire", rate: 100, inFlight: 10, asks: []ask{
			{0, "a", 500, 50, tenant.Grant{Attempts: 100, InFlight: 10}},
			{100 * time.Millisecond, "b", 500, 50, tenant.Grant{}},
			{time.Second, "a", 500, 50, tenant.Grant{Attempts: 50, InFlight: 5}},
			{time.Second + 100*time.Millisecond, "b", 500, 50, tenant.Grant{Attempts: 50, InFlight: 5}},
		}},
		{name: "max-min: a small want is served whole", rate: 90, inFlight: 9, asks: []ask{
			{0, "a", 10, 1, tenant.Grant{Attempts: 10, InFlight: 1}},
			{0, "b", 500, 50, tenant.Grant{Attempts: 80, InFlight: 8}},
		}},
		{name: "three share with a remainder", rate: 10, inFlight: 10, asks: []ask{
			{0, "a", 100, 100, tenant.Grant{Attempts: 10, InFlight: 10}},
			{0, "b", 100, 100, tenant.Grant{}}, // all held by a
			{0, "c", 100, 100, tenant.Grant{}},
			{time.Second, "a", 100, 100, tenant.Grant{Attempts: 4, InFlight: 4}},
			{time.Second, "b", 100, 100, tenant.Grant{Attempts: 3, InFlight: 3}},
			{time.Second, "c", 100, 100, tenant.Grant{Attempts: 3, InFlight: 3}},
		}},
		{name: "an idle endpoint leaves the split", rate: 100, inFlight: 10, asks: []ask{
			{0, "a", 500, 50, tenant.Grant{Attempts: 100, InFlight: 10}},
			{time.Second, "b", 500, 50, tenant.Grant{Attempts: 50, InFlight: 5}},
			{5 * time.Second, "b", 500, 50, tenant.Grant{Attempts: 100, InFlight: 10}},
		}},
		{name: "fractional rate rounds down", rate: 2.5, inFlight: 1, asks: []ask{
			{0, "a", 10, 10, tenant.Grant{Attempts: 2, InFlight: 1}},
		}},
		{name: "negative wants count as zero", rate: 10, inFlight: 1, asks: []ask{
			{0, "a", -5, -1, tenant.Grant{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tenant.NewLeases(time.Second, 3*time.Second)
			for i, a := range tt.asks {
				now := t0.Add(a.at)
				got := l.Grant(now, a.endpoint, a.attempts, a.inFlight, tt.rate, tt.inFlight)
				want := a.want
				want.Expires = now.Add(time.Second)
				if got != want {
					t.Fatalf("ask %d (%s at %v): got %+v, want %+v", i, a.endpoint, a.at, got, want)
				}
			}
		})
	}
}

// TestLeaseRenewedEarly: an endpoint that used up its lease and asks
// again before the lease ends gets only what is left of its share for
// that period, and then nothing until the period ends: the tenant's
// attempts per second hold however often an endpoint asks. Asked in the
// period's last quarter, the lease of the next period is granted ahead,
// once.
func TestLeaseRenewedEarly(t *testing.T) {
	l := tenant.NewLeases(time.Second, 3*time.Second)
	end := t0.Add(time.Second)
	steps := []struct {
		at   time.Duration
		want tenant.Grant
	}{
		{0, tenant.Grant{Attempts: 10, InFlight: 100, Expires: end}},
		{100 * time.Millisecond, tenant.Grant{Expires: end}}, // used up: wait for the period's end
		{700 * time.Millisecond, tenant.Grant{Expires: end}},
		// In the period's last quarter: the next period's lease, ahead.
		{800 * time.Millisecond, tenant.Grant{Attempts: 10, InFlight: 100, Expires: t0.Add(2 * time.Second)}},
		// Asked again once it began: that period's share is spent.
		{time.Second, tenant.Grant{Expires: t0.Add(2 * time.Second)}},
		{1900 * time.Millisecond, tenant.Grant{Attempts: 10, InFlight: 100, Expires: t0.Add(3 * time.Second)}},
	}
	granted := int32(0)
	for i, st := range steps {
		got := l.Grant(t0.Add(st.at), "a", 100, 100, 10, 100)
		if got != st.want {
			t.Fatalf("ask %d at %v: got %+v, want %+v", i, st.at, got, st.want)
		}
		granted += got.Attempts
	}
	if granted != 30 {
		t.Fatalf("%d attempts granted for three periods at 10 per second, want 30", granted)
	}
	// Within a budget that covers it, an endpoint that asks again gets
	// what it wants, as often as it asks.
	l = tenant.NewLeases(time.Second, 3*time.Second)
	for i, at := range []time.Duration{0, 10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond} {
		got := l.Grant(t0.Add(at), "a", 20, 5, 1000, 100)
		if want := (tenant.Grant{Attempts: 20, InFlight: 5, Expires: t0.Add(time.Second)}); got != want {
			t.Fatalf("ask %d within an ample budget: got %+v, want %+v", i, got, want)
		}
	}
}

// BenchmarkLeases500 is the fairness scenario's tenant: 500 endpoints
// renewing their leases in turn, each with a slightly different want.
func BenchmarkLeases500(b *testing.B) {
	l := tenant.NewLeases(time.Second, 3*time.Second)
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = "ep_" + string(rune('a'+i%26)) + string(rune('a'+i/26))
	}
	now := t0
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		now = now.Add(2 * time.Millisecond) // 500 asks per second
		l.Grant(now, ids[i%len(ids)], int32(10+i%7), 10, 100, 100)
	}
}
