package node

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/due"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/reconcile"
)

// metrics are the node's Prometheus metrics, served at /metrics.
//
// Delivery outcomes are counted by a projection of the log (metricsView),
// once per event, by the node that owns the delivery's partition: in a
// cluster, sum the _total counters over the nodes (each counts its own
// partitions; circuit transitions, which belong to no partition, are
// counted by every node). Node-local figures (queue ages, projection lag,
// append latency, dispatcher slots, partitions) are gauges and histograms
// of the node that serves them.
type metrics struct {
	reg *prometheus.Registry

	appendSeconds *prometheus.HistogramVec
	view          *metricsView
}

// maxTracked bounds the deliveries whose planned time is remembered to
// measure the first attempt's latency.
const maxTracked = 1 << 20

func newMetrics() *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.appendSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "hookline_log_append_seconds",
		Help:    "Latency of durable appends to the event log, by stream category.",
		Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16),
	}, []string{"category"})
	m.view = &metricsView{
		planned: map[string]time.Time{},
		circuit: map[string]string{},
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_attempts_total",
			Help: "Delivery attempts by result (success, retry, failed) and status class (2xx, 3xx, 4xx, 5xx, or the error class).",
		}, []string{"result", "class", "manual"}),
		firstAttempt: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookline_first_attempt_seconds",
			Help:    "Time from planning a delivery to the start of its first attempt.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18),
		}),
		plannedTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "hookline_deliveries_planned_total", Help: "Deliveries planned by publishes."}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_deliveries_ended_total", Help: "Deliveries that ended, by status (succeeded, failed, expired).",
		}, []string{"status"}),
		replays: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookline_replays_total", Help: "Manual replays: requested, and the results of their attempts.",
		}, []string{"outcome"}),
		circuits: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookline_circuits", Help: "Endpoints whose circuit breaker is open or half-open (closed ones are not counted).",
		}, []string{"state"}),
		throttles: newThrottles(),
	}
	v := m.view
	m.reg.MustRegister(m.appendSeconds, v.attempts, v.firstAttempt, v.plannedTotal, v.ended, v.replays, v.circuits)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_retry_amplification",
		Help: "Attempts per delivery attempted (1 means no retries).",
	}, v.amplification))
	return m
}

// nodeGauges registers the node-local gauges.
func (m *metrics) nodeGauges(s *Server) {
	gauge := func(name, help string, f func() float64) {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("hookline_due_oldest_new_seconds", "Age of the oldest new delivery waiting for its first attempt.", func() float64 {
		return s.due.Stats(s.cfg.Now()).OldestNew.Seconds()
	})
	gauge("hookline_due_oldest_retry_seconds", "How long the most overdue retry has been due.", func() float64 {
		return s.due.Stats(s.cfg.Now()).OldestRetry.Seconds()
	})
	gauge("hookline_projection_lag_seconds", "How stale the node's projections are (0 when caught up).", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		lag, err := s.runner.Lag(ctx)
		if err != nil {
			return -1
		}
		return lag.Age.Seconds()
	})
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hookline_projection_records_total",
		Help: "Log records this node's projections applied since it started (its share of the cluster's).",
	}, func() float64 { return float64(s.runner.Stats().Records) }))
	blocked := &blockedKeys{due: s.due, now: s.cfg.Now}
	gauge("hookline_ordering_blocked_keys", "Ordering keys of this node's partitions whose head delivery has failed (waiting for a retry, or parked).", func() float64 {
		st, err := blocked.read()
		if err != nil {
			return -1
		}
		return float64(st.Blocked)
	})
	gauge("hookline_ordering_oldest_blocked_seconds", "How long the longest-blocked ordering key of this node's partitions has waited.", func() float64 {
		st, err := blocked.read()
		if err != nil {
			return -1
		}
		return st.OldestBlocked.Seconds()
	})
	gauge("hookline_partitions_owned", "Delivery partitions this node follows: as their owner, their target or a standby.", func() float64 { return float64(s.runner.Stats().Owned) })
	gauge("hookline_partitions_live", "Followed delivery partitions whose projections have caught up.", func() float64 { return float64(s.runner.Stats().Live) })
	gauge("hookline_partitions_served", "Delivery partitions this node serves (runs their grains, attempts their deliveries), caught up.", func() float64 {
		return float64(s.runner.Stats().Served)
	})
	for _, mode := range []string{"warn", "reject"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hookline_schema_violations_total", ConstLabels: prometheus.Labels{"mode": mode},
			Help: "Publishes whose payload did not match its event type's schema: accepted and recorded (warn) or refused (reject).",
		}, func() float64 {
			if s.control == nil {
				return 0
			}
			warned, rejected := s.control.SchemaViolations()
			if mode == "warn" {
				return float64(warned)
			}
			return float64(rejected)
		}))
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hookline_wakes_sent_total", Help: "Wake hints sent to endpoint grains.",
	}, func() float64 { return float64(s.waker.sent.Load()) }))
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "hookline_wakes_held_back_total", Help: "Wake hints not sent: the endpoint is paused or disabled.",
	}, func() float64 { return float64(s.waker.skipped.Load()) }))
	gauge("hookline_grains_active", "Tenant and endpoint grains active on this node (idle ones passivate).", func() float64 {
		return float64(s.activeGrains())
	})
	gauge("hookline_dispatch_slots_used", "Attempt slots in use on this node.", func() float64 { return float64(s.dispatch.Stats().Used) })
	gauge("hookline_dispatch_waiting_new", "New deliveries waiting for an attempt slot (tenant throttling).", func() float64 {
		return float64(s.dispatch.Stats().Waiting[0])
	})
	gauge("hookline_dispatch_waiting_retry", "Retries waiting for an attempt slot.", func() float64 { return float64(s.dispatch.Stats().Waiting[1]) })
	gauge("hookline_dispatch_oldest_new_wait_seconds", "How long the oldest new delivery has waited for a slot.", func() float64 {
		return s.dispatch.Stats().OldestNew.Seconds()
	})
	m.reg.MustRegister(throttleMetrics{t: m.view.throttles, now: s.cfg.Now, dispatch: s.dispatch})
	m.operationalGauges(s)
}

// reconcileGauges registers the background reconciler's counts and the
// last full run's: any discrepancy count that is not zero is an alert.
func (m *metrics) reconcileGauges(s *Server) {
	if b := s.backdrop; b != nil {
		for _, kind := range reconcile.BackgroundKinds {
			m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "hookline_reconcile_discrepancies",
				Help:        "Discrepancies the background reconciler found in its last run, by kind (an alert when not zero; hookline reconcile lists their ids).",
				ConstLabels: prometheus.Labels{"kind": kind},
			}, func() float64 { c, _, _, _ := b.Counts(); return float64(c[kind]) }))
		}
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "hookline_reconcile_held_endpoints",
			Help: "Endpoints paused or disabled while holding due deliveries (they wait for a resume; not a discrepancy).",
		}, func() float64 { _, held, _, _ := b.Counts(); return float64(held) }))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "hookline_reconcile_background_runs_total",
			Help: "Runs of the background reconciler's checks.",
		}, func() float64 { _, _, runs, _ := b.Counts(); return float64(runs) }))
	}
	last := func(f func(l *lastRun) float64) func() float64 {
		return func() float64 {
			l := &s.recon.last
			l.mu.Lock()
			defer l.mu.Unlock()
			return f(l)
		}
	}
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_reconcile_last_discrepancies",
		Help: "Discrepancies found by the last full reconcile run from this node (hookline reconcile).",
	}, last(func(l *lastRun) float64 { return float64(l.discrepancies) })))
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_reconcile_last_run_timestamp_seconds",
		Help: "When the last full reconcile run from this node ended (0: none since the node started).",
	}, last(func(l *lastRun) float64 {
		if l.at.IsZero() {
			return 0
		}
		return float64(l.at.UnixNano()) / 1e9
	})))
}

// metricsView is the projection that counts outcomes from the log. Its
// counters move only after the batch that applied the events committed,
// and only for the partitions this node serves when it applies them: a
// standby applies the same records without counting them, and a partition
// that moves here is not counted again, so the cluster's sum counts each
// outcome once (the member that served it).
type metricsView struct {
	served atomic.Pointer[events.PartitionSet] // the partitions counted

	mu      sync.Mutex           // guards planned, circuit, attempted, all
	planned map[string]time.Time // delivery id → planned time, until its first attempt
	circuit map[string]string    // endpoint id → state, open or half-open only
	// attempted counts deliveries with a first attempt; all counts attempts.
	attempted, all float64

	attempts     *prometheus.CounterVec
	firstAttempt prometheus.Histogram
	plannedTotal prometheus.Counter
	ended        *prometheus.CounterVec
	replays      *prometheus.CounterVec
	circuits     *prometheus.GaugeVec
	throttles    *throttles // what held each tenant back (metrics_tenants.go)
}

func (*metricsView) Name() string { return "metrics" }

func (*metricsView) Filter() events.Filter {
	return events.Filter{Types: []string{"DeliveriesPlanned", "AttemptSucceeded", "AttemptFailed", "DeliveryExpired", "ReplayRequested", "CircuitOpened", "CircuitHalfOpened", "CircuitClosed"}}
}

// Apply counts msg once its batch commits; the runner decodes every record
// into a message of its own, so msg may be kept.
func (v *metricsView) Apply(b *projections.Batch, rec *events.Record, msg proto.Message) error {
	p := rec.Partition
	if e, ok := msg.(interface{ GetEndpointId() string }); ok && p == events.NoPartition {
		p = events.PartitionOf(e.GetEndpointId()) // a circuit: its endpoint's partition
	}
	if s := v.served.Load(); s == nil || !s.Has(p) {
		return nil
	}
	b.OnCommit(func() { v.count(msg) })
	return nil
}

// PartitionsChanged implements projections.Partitioned: the view counts the
// outcomes of the partitions served here; it keeps nothing per partition.
func (v *metricsView) PartitionsChanged(served events.PartitionSet) { v.served.Store(&served) }

func (v *metricsView) count(msg proto.Message) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch m := msg.(type) {
	case *hooklinev1.DeliveriesPlanned:
		v.plannedTotal.Add(float64(len(m.GetDeliveries())))
		if len(v.planned) < maxTracked {
			for _, d := range m.GetDeliveries() {
				v.planned[d.GetDeliveryId()] = m.GetAt().AsTime()
			}
		}
	case *hooklinev1.AttemptSucceeded:
		v.attempt(m.GetAttempt(), "success")
		v.ended.WithLabelValues("succeeded").Inc()
	case *hooklinev1.AttemptFailed:
		result := "retry"
		if m.GetNextAttemptAt() == nil {
			result = "failed"
			if !m.GetAttempt().GetManual() {
				v.ended.WithLabelValues("failed").Inc()
			}
		}
		v.attempt(m.GetAttempt(), result)
	case *hooklinev1.DeliveryExpired:
		v.ended.WithLabelValues("expired").Inc()
		delete(v.planned, m.GetDeliveryId())
	case *hooklinev1.ReplayRequested:
		v.replays.WithLabelValues("requested").Inc()
	case *hooklinev1.CircuitOpened:
		v.setCircuit(m.GetEndpointId(), "open")
	case *hooklinev1.CircuitHalfOpened:
		v.setCircuit(m.GetEndpointId(), "half_open")
	case *hooklinev1.CircuitClosed:
		v.setCircuit(m.GetEndpointId(), "closed")
	}
}

// attempt counts one attempt. v.mu must be held.
func (v *metricsView) attempt(a *hooklinev1.Attempt, result string) {
	v.attempts.WithLabelValues(result, statusClass(a), strconv.FormatBool(a.GetManual())).Inc()
	v.throttles.record(a, time.Now())
	v.all++
	if a.GetManual() {
		if result == "success" {
			v.replays.WithLabelValues("succeeded").Inc()
		} else {
			v.replays.WithLabelValues("failed").Inc()
		}
	}
	if a.GetNumber() == 1 {
		v.attempted++
		if at, ok := v.planned[a.GetDeliveryId()]; ok {
			v.firstAttempt.Observe(a.GetStartedAt().AsTime().Sub(at).Seconds())
		}
	}
	delete(v.planned, a.GetDeliveryId())
}

// setCircuit moves an endpoint's breaker state. Closed circuits are not
// kept: the map holds only the endpoints whose circuit is open or
// half-open now, however many endpoints ever had a transition. v.mu must
// be held.
func (v *metricsView) setCircuit(endpointID, state string) {
	if old, ok := v.circuit[endpointID]; ok {
		v.circuits.WithLabelValues(old).Dec()
	}
	if state == "closed" {
		delete(v.circuit, endpointID)
		return
	}
	v.circuit[endpointID] = state
	v.circuits.WithLabelValues(state).Inc()
}

func (v *metricsView) amplification() float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.attempted == 0 {
		return 0
	}
	return v.all / v.attempted
}

// statusClass is 2xx…5xx for an HTTP answer, else the error class.
func statusClass(a *hooklinev1.Attempt) string {
	if s := a.GetHttpStatus(); s >= 100 && s < 600 {
		return strconv.Itoa(int(s)/100) + "xx"
	}
	c := a.GetErrorClass().String()
	if len(c) > len("ERROR_CLASS_") {
		c = c[len("ERROR_CLASS_"):]
	}
	return c
}

// timedLog measures append latency of the log it wraps.
type timedLog struct {
	events.Log
	seconds *prometheus.HistogramVec
}

func (l timedLog) Append(ctx context.Context, stream string, expected events.ExpectedRevision, evs ...events.Event) (events.AppendResult, error) {
	start := time.Now()
	res, err := l.Log.Append(ctx, stream, expected, evs...)
	l.seconds.WithLabelValues(events.Category(stream)).Observe(time.Since(start).Seconds())
	return res, err
}

// activeGrains counts the tenant and endpoint grains active on this node.
func (s *Server) activeGrains() int {
	n := s.started.Load()
	if n == nil {
		return 0
	}
	return n.Active(tenant.Kind) + n.Active(endpoint.Kind)
}

// blockedKeys is the summary of the blocked ordering keys for the two
// gauges that show it: one scrape reads the store once (a scan of every
// live partition's keys) for both, and scrapes closer together than
// blockedEvery share a reading.
type blockedKeys struct {
	due *due.Due
	now func() time.Time

	mu  sync.Mutex
	at  time.Time
	st  due.KeyStats
	err error
}

// blockedEvery is how long a reading of the blocked keys is reused.
const blockedEvery = 250 * time.Millisecond

func (b *blockedKeys) read() (due.KeyStats, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	if b.at.IsZero() || now.Sub(b.at) >= blockedEvery || now.Before(b.at) {
		b.st, b.err = b.due.BlockedKeys(now)
		b.at = now
	}
	return b.st, b.err
}
