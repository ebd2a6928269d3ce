package node

import "github.com/prometheus/client_golang/prometheus"

// operationalGauges registers the figures of the node's operational
// events (package operational): its outbox, and what its emitter did.
func (m *metrics) operationalGauges(s *Server) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hookline_operational_outbox",
		Help: "Operational events waiting in this node's outbox (its partitions' to publish; others' until they age out).",
	}, func() float64 {
		if s.opsFeed == nil {
			return 0
		}
		n, err := s.opsFeed.Pending()
		if err != nil {
			return -1
		}
		return float64(n)
	}))
	for _, result := range []string{"emitted", "rejected"} {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "hookline_operational_events_total",
			Help:        "Operational events this node's emitter published (emitted: planned, answered as duplicates, or wanted by no endpoint) or dropped as invalid (rejected).",
			ConstLabels: prometheus.Labels{"result": result},
		}, func() float64 {
			if s.opsEmit == nil {
				return 0
			}
			st := s.opsEmit.Stats()
			if result == "emitted" {
				return float64(st.Emitted)
			}
			return float64(st.Rejected)
		}))
	}
}
