package control

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// readyWait bounds how long a call that comes before the node is ready
// waits for it, when no other member can serve it, before it is refused
// with UNAVAILABLE; readyWaiters bounds the calls that wait at once (they
// are not authenticated yet): the others are refused at once.
const (
	readyWait    = 10 * time.Second
	readyWaiters = 256
)

var errNotReady = status.Error(codes.Unavailable, "the node is still catching up with the log after its start; retry shortly or on another node")

// Ready marks the node ready: its projections have applied the log as it
// was when the node started, so the registry knows every tenant, key and
// endpoint. Until then calls are not answered from a registry that lags
// the log (a publish would plan for no endpoint, a valid key would be
// refused): they are refused with UNAVAILABLE while another member can
// serve them, and otherwise wait (at most readyWait); health checks say
// not serving. Later calls do nothing.
func (s *Server) Ready() {
	s.readyOnce.Do(func() {
		close(s.ready)
		s.health.SetServingStatus("", grpc_health_v1.HealthCheckResponse_SERVING)
	})
}

// awaitReady waits until the node is ready, the call's context ends or
// readyWait passes; it refuses the call at once when another member can
// serve it (Config.ServedElsewhere). A member restarted in a rolling
// upgrade catches up for seconds: the calls a round-robin client sent it
// meanwhile stalled their callers, then reached the cluster all at once
// when it was ready, just as its partitions were handed back to it.
func (s *Server) awaitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	default:
	}
	if s.cfg.ServedElsewhere != nil && s.cfg.ServedElsewhere() {
		return errNotReady
	}
	if s.waiting.Add(1) > readyWaiters {
		s.waiting.Add(-1)
		return errNotReady
	}
	defer s.waiting.Add(-1)
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-t.C:
		return errNotReady
	}
}
