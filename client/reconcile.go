package client

import (
	"context"

	"google.golang.org/grpc"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// maxReport bounds the size of a reconcile report the client accepts: a
// report lists up to thousands of discrepancies with their ids.
const maxReport = 64 << 20

// Reconcile compares every durable boundary of the node's cluster with the
// log and, with req.Repair, repairs what it can (see package reconcile).
// Admin token only. A run reads the whole log: it is bounded by ctx alone
// (not Config.AttemptTimeout), and not retried; call it again.
func (c *Client) Reconcile(ctx context.Context, req *controlv1.ReconcileRequest) (*controlv1.ReconcileReport, error) {
	rc := controlv1.NewReconcileServiceClient(c.cc)
	return longCall(ctx, c, "reconcile", req, func(ctx context.Context, r *controlv1.ReconcileRequest, opts ...grpc.CallOption) (*controlv1.ReconcileReport, error) {
		return rc.Reconcile(ctx, r, append(opts, grpc.MaxCallRecvMsgSize(maxReport))...)
	})
}
