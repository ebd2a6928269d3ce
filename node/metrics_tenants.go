package node

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/dispatch"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// maxThrottled bounds the tenants listed as held back, in /metrics and in
// the cluster status: the ones held back most, never every tenant.
const maxThrottled = 20

// The reasons a tenant's attempts waited, as labelled in /metrics.
const (
	waitQuota     = iota // the tenant's quota: attempts per second, in flight
	waitSlot             // a slot of the node's fair dispatcher
	waitRateLimit        // its endpoints' rate limits
	waitReasons
)

var waitReasonNames = [waitReasons]string{"quota", "slot", "rate_limit"}

// throttles sums, per tenant, what held its attempts back over the last
// minute: the waits each attempt of the node's partitions records
// (hooklinev1.AttemptWaits), read by the metrics view as it counts the
// attempt. With the dispatcher's tenants waiting now, it says which
// tenants are throttled and by what: in /metrics (a Prometheus collector)
// and in the node's status. It is safe for concurrent use.
type throttles struct {
	mu       sync.Mutex // guards byTenant
	byTenant map[string]*waitWindow
}

// waitWindow is one tenant's seconds of wait, by reason, in the current
// minute and the one before: the last minute's sum is the current
// minute's and the part of the previous one still within a minute.
type waitWindow struct {
	minute    int64 // Unix minute of cur
	cur, prev [waitReasons]float64
}

func newThrottles() *throttles { return &throttles{byTenant: map[string]*waitWindow{}} }

// record adds the waits of attempt a, made at its start; now is the
// node's clock. An attempt from before the last minute (a projection
// catching up) adds nothing.
func (t *throttles) record(a *hooklinev1.Attempt, now time.Time) {
	w := a.GetWaits()
	secs := [waitReasons]float64{
		waitQuota:     float64(w.GetTenantQuotaMs()) / 1000,
		waitSlot:      float64(w.GetSlotMs()) / 1000,
		waitRateLimit: float64(w.GetRateLimitMs()) / 1000,
	}
	if secs == [waitReasons]float64{} {
		return
	}
	m, nowMin := a.GetStartedAt().AsTime().Unix()/60, now.Unix()/60
	if m < nowMin-1 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	win := t.byTenant[a.GetTenantId()]
	if win == nil {
		win = &waitWindow{minute: nowMin}
		t.byTenant[a.GetTenantId()] = win
	}
	win.advance(nowMin)
	into := &win.cur
	if m < nowMin {
		into = &win.prev
	}
	for i, s := range secs {
		into[i] += s
	}
}

// advance moves w to the minute nowMin.
func (w *waitWindow) advance(nowMin int64) {
	switch {
	case nowMin == w.minute+1:
		w.prev, w.cur = w.cur, [waitReasons]float64{}
	case nowMin > w.minute+1:
		w.prev, w.cur = [waitReasons]float64{}, [waitReasons]float64{}
	default:
		return
	}
	w.minute = nowMin
}

// top returns the tenants held back most over the minute before now
// (seconds of wait, then attempts waiting for a slot), at most
// maxThrottled, with the dispatcher's tenants waiting now (live). Tenants
// whose window emptied are forgotten.
func (t *throttles) top(now time.Time, live []dispatch.TenantStats) []*controlv1.TenantThrottle {
	byID := map[string]*controlv1.TenantThrottle{}
	get := func(id string) *controlv1.TenantThrottle {
		if tt := byID[id]; tt != nil {
			return tt
		}
		tt := &controlv1.TenantThrottle{TenantId: id}
		byID[id] = tt
		return tt
	}
	nowMin := now.Unix() / 60
	rest := 1 - float64(now.Unix()%60)/60 // the part of the previous minute within the last one
	t.mu.Lock()
	for id, w := range t.byTenant {
		w.advance(nowMin)
		var s [waitReasons]float64
		for i := range s {
			s[i] = w.cur[i] + w.prev[i]*rest
		}
		if s == [waitReasons]float64{} {
			delete(t.byTenant, id) // nothing within the last minute
			continue
		}
		tt := get(id)
		tt.QuotaSeconds, tt.SlotSeconds, tt.RateLimitSeconds = round3(s[waitQuota]), round3(s[waitSlot]), round3(s[waitRateLimit])
	}
	t.mu.Unlock()
	for _, ls := range live {
		tt := get(ls.TenantID)
		tt.Waiting, tt.AtCap = int32(ls.Waiting[0]+ls.Waiting[1]), ls.AtCap
	}
	out := make([]*controlv1.TenantThrottle, 0, len(byID))
	for _, tt := range byID {
		out = append(out, tt)
	}
	slices.SortFunc(out, func(a, b *controlv1.TenantThrottle) int {
		return cmp.Or(
			cmp.Compare(waited(b), waited(a)),
			cmp.Compare(b.GetWaiting(), a.GetWaiting()),
			cmp.Compare(a.GetTenantId(), b.GetTenantId()),
		)
	})
	return out[:min(len(out), maxThrottled)]
}

func waited(tt *controlv1.TenantThrottle) float64 {
	return tt.GetQuotaSeconds() + tt.GetSlotSeconds() + tt.GetRateLimitSeconds()
}

func round3(x float64) float64 { return float64(int64(x*1000+0.5)) / 1000 }

// throttleMetrics exports top as gauges, labelled by tenant: the label
// set is the tenants held back now, at most maxThrottled.
type throttleMetrics struct {
	t        *throttles
	now      func() time.Time
	dispatch *dispatch.Dispatcher
}

var (
	tenantWaitDesc = prometheus.NewDesc("hookline_tenant_wait_seconds",
		"Seconds a tenant's attempts waited over the last minute, by what held them: its quota (quota), a dispatcher slot (slot), its endpoints' rate limits (rate_limit). Only the tenants held back most (at most 20) are listed.",
		[]string{"tenant_id", "reason"}, nil)
	tenantWaitingDesc = prometheus.NewDesc("hookline_tenant_waiting_attempts",
		"A throttled tenant's attempts waiting for a dispatcher slot now.", []string{"tenant_id"}, nil)
	tenantAtCapDesc = prometheus.NewDesc("hookline_tenant_at_slot_cap",
		"1 when a throttled tenant holds the most dispatcher slots one tenant may.", []string{"tenant_id"}, nil)
)

// Describe implements prometheus.Collector.
func (m throttleMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- tenantWaitDesc
	ch <- tenantWaitingDesc
	ch <- tenantAtCapDesc
}

// Collect implements prometheus.Collector.
func (m throttleMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, tt := range m.t.top(m.now(), m.dispatch.Tenants()) {
		id := tt.GetTenantId()
		for i, v := range []float64{tt.GetQuotaSeconds(), tt.GetSlotSeconds(), tt.GetRateLimitSeconds()} {
			ch <- prometheus.MustNewConstMetric(tenantWaitDesc, prometheus.GaugeValue, v, id, waitReasonNames[i])
		}
		ch <- prometheus.MustNewConstMetric(tenantWaitingDesc, prometheus.GaugeValue, float64(tt.GetWaiting()), id)
		atCap := 0.0
		if tt.GetAtCap() {
			atCap = 1
		}
		ch <- prometheus.MustNewConstMetric(tenantAtCapDesc, prometheus.GaugeValue, atCap, id)
	}
}

// throttled is the node's throttled tenants, for its status.
func (s *Server) throttled() []*controlv1.TenantThrottle {
	return s.metrics.view.throttles.top(s.cfg.Now(), s.dispatch.Tenants())
}
