package control

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Reconciler runs one reconcile over the cluster; the node's reconciler
// satisfies it.
type Reconciler interface {
	Reconcile(ctx context.Context, req *controlv1.ReconcileRequest, issuedBy *hooklinev1.Actor) (*controlv1.ReconcileReport, error)
}

// ErrReconcileBusy is what a Reconciler answers while another run holds
// the node; it maps to RESOURCE_EXHAUSTED. The node's own error wraps it.
var ErrReconcileBusy = errors.New("control: a reconcile is already running")

// maxListed bounds a report's max_listed (the counts cover every
// discrepancy whatever it is); 0 means the reconciler's default,
// defaultListed (reconcile.DefaultMaxListed).
const (
	maxListed     = 100_000
	defaultListed = 1000
)

// Reconcile compares every durable boundary with the log and, with repair,
// repairs (admin only). It takes as long as reading the log: give the call
// a deadline of minutes on a large log.
func (s *Server) Reconcile(ctx context.Context, req *controlv1.ReconcileRequest) (*controlv1.ReconcileReport, error) {
	c, err := requireAdmin(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkPage("max_listed", req.GetMaxListed(), maxListed, defaultListed); err != nil {
		return nil, toStatus(err)
	}
	if ms := req.GetNotPulledAfterMs(); ms < 0 {
		return nil, toStatus(invalid("not_pulled_after_ms", "is %d; give 0 (60 s) or more", ms))
	}
	if s.cfg.Reconciler == nil {
		return nil, status.Error(codes.Unimplemented, "this node does not reconcile")
	}
	report, err := s.cfg.Reconciler.Reconcile(ctx, req, c.Actor())
	if errors.Is(err, ErrReconcileBusy) {
		return nil, status.Error(codes.ResourceExhausted, err.Error())
	}
	return report, toStatus(err)
}
