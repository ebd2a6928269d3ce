package relay

import "github.com/prometheus/client_golang/prometheus"

// metrics are a Worker's Prometheus metrics:
//
//	hookline_relay_rows_waiting            gauge: committed rows not relayed yet
//	hookline_relay_rows_refused            gauge: rows Hookline refused, waiting for a person
//	hookline_relay_oldest_row_age_seconds  gauge: age of the oldest waiting row (0: none)
//	hookline_relay_lag_seconds             histogram: from a row's insert to its relay
//	hookline_relay_rows_total{outcome}     counter: rows relayed by this Worker, by outcome:
//	                                       published (a new event), duplicate (accepted
//	                                       before), refused; published per second is
//	                                       rate(hookline_relay_rows_total{outcome="published"})
//	hookline_relay_batch_failures_total    counter: batches that failed and will be retried
//	hookline_relay_rows_deleted_total      counter: relayed rows deleted after the retention
//
// The gauges are read from the table, so every Worker on one outbox shows
// the same values; the counters are this Worker's.
type metrics struct {
	waiting, refused, oldest prometheus.Gauge
	lag                      prometheus.Histogram
	published, duplicate     prometheus.Counter
	refusedRows              prometheus.Counter
	failures, deleted        prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	rows := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "hookline_relay_rows_total", Help: "Outbox rows relayed by this worker, by outcome: published (a new event), duplicate (accepted before), refused.",
	}, []string{"outcome"})
	m := &metrics{
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookline_relay_rows_waiting", Help: "Committed outbox rows not relayed yet."}),
		refused: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookline_relay_rows_refused", Help: "Outbox rows Hookline refused, waiting for a person."}),
		oldest:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "hookline_relay_oldest_row_age_seconds", Help: "Age of the oldest waiting outbox row; 0 when none waits."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hookline_relay_lag_seconds", Help: "Time from an outbox row's insert to its relay.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 17),
		}),
		published:   rows.WithLabelValues("published"),
		duplicate:   rows.WithLabelValues("duplicate"),
		refusedRows: rows.WithLabelValues("refused"),
		failures:    prometheus.NewCounter(prometheus.CounterOpts{Name: "hookline_relay_batch_failures_total", Help: "Relay batches that failed and will be retried."}),
		deleted:     prometheus.NewCounter(prometheus.CounterOpts{Name: "hookline_relay_rows_deleted_total", Help: "Relayed outbox rows deleted after the retention."}),
	}
	if reg != nil {
		reg.MustRegister(m.waiting, m.refused, m.oldest, m.lag, rows, m.failures, m.deleted)
	}
	return m
}
