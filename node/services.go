package node

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/cluster"
)

// The node's services: named actors every member runs beside its grains,
// for the traffic between members that is not a grain command (see
// cluster.Node.Serve).
const (
	// historyService answers the other members' HistoryScan and HistoryGet
	// from this node's partitions.
	historyService = "hookline-history"
	// retentionService answers the other members' HistoryEnds: which of
	// a tenant's deliveries in this node's partitions ended, before a
	// tenant's own retention drops their event.
	retentionService = "hookline-retention"
	// reconcileService reconciles this node's partitions for a run another
	// member leads.
	reconcileService = "hookline-reconcile"
	// settleService waits until this node's projections have applied a
	// position.
	settleService = "hookline-settle"
	// statusService answers NodeStatusQuery with this node's figures.
	statusService = "hookline-status"
	// handOverService receives the plans other members published for this
	// node's partitions.
	handOverService = "hookline-handover"
	// partitionsService receives the PartitionsReady of the members that
	// should take partitions this node owns, and the MemberLeaving of the
	// members stopping.
	partitionsService = "hookline-partitions"
)

// ask asks the service name of the member at addr and checks the type of
// its answer; timeout 0 is the node's request timeout.
func ask[T proto.Message](ctx context.Context, n *cluster.Node, addr, name string, msg proto.Message, timeout time.Duration) (T, error) {
	var zero T
	res, err := n.Ask(ctx, addr, name, msg, timeout)
	if err != nil {
		return zero, err
	}
	out, ok := res.(T)
	if !ok {
		return zero, fmt.Errorf("%s on %s answered %T", name, addr, res)
	}
	return out, nil
}
