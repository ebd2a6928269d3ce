package endpoint

import "sync/atomic"

// Drain lets a node stop gracefully without cutting attempts short: once
// started, the node's endpoint grains start no new attempt (deliveries stay
// due, for the grains' next owners), while attempts already running finish
// and their outcomes are recorded. The node then leaves the cluster. The
// zero value is ready to use and not draining; it is safe for concurrent
// use, and a nil *Drain never drains.
type Drain struct{ on atomic.Bool }

// Start begins draining. It cannot be undone: a node drains once, on stop.
func (d *Drain) Start() { d.on.Store(true) }

// Draining reports whether Start was called.
func (d *Drain) Draining() bool { return d != nil && d.on.Load() }
