package endpoint

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/dispatch"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// The delivery loop's collaborators, defined here where they are used.
// The node passes the concrete types named on each Config field.

// Due lists an endpoint's deliveries that need an attempt now, new ones
// first; *due.Due satisfies it.
type Due interface {
	Pull(endpointID string, now time.Time, limit int) ([]due.Item, error)
}

// Outcomes tells whether a delivery's outcome is applied: its due item
// counts the attempt, or it has none left (Get); Watch asks for a wake of
// the delivery's endpoint once it is, until a time. *due.Due satisfies it.
type Outcomes interface {
	Get(deliveryID string) (due.Item, bool, error)
	Watch(deliveryID string, until time.Time)
	Unwatch(deliveryID string)
}

// Projections waits until the node's projections of a delivery partition
// have applied the log up to a position; *projections.Runner satisfies it.
type Projections interface {
	WaitForPartition(ctx context.Context, p events.Partition, pos events.Position) error
	// Applied is the position up to which the projections of every live
	// partition have applied the log.
	Applied() events.Position
}

// History finds the deliveries of the node's partitions, which include the
// grain's own; *history.History satisfies it.
type History interface {
	Get(tenantID, deliveryID string) (history.Delivery, bool, error)
	Search(q history.Query) (history.Page, error)
}

// Attempter runs one HTTP attempt; *attempt.Client satisfies it.
type Attempter interface {
	Do(ctx context.Context, req attempt.Request) attempt.Outcome
}

// Dispatcher grants the node's attempt slots; *dispatch.Dispatcher
// satisfies it. grant must not block. Promote turns up to n of an
// endpoint's waiting requests for retries into requests for new work;
// Release says what became of the slot's attempt (a tenant whose attempts
// time out holds fewer slots).
type Dispatcher interface {
	Acquire(tenantID, endpointID string, c due.Class, grant func())
	Promote(tenantID, endpointID string, n int)
	Release(tenantID, endpointID string, o dispatch.Outcome)
	Leave(tenantID, endpointID string)
}

// Grains sends a request to a grain of the cluster and returns its answer;
// *cluster.Node satisfies it. The endpoint grain asks the tenant grain for
// quota leases through it.
type Grains interface {
	Request(ctx context.Context, kind, identity string, msg proto.Message) (proto.Message, error)
}

// Spans exports attempts as spans of their traces (the node's OTLP
// exporter, *otlp.Exporter); Attempted is called on the grain, once an
// attempt's outcome is durable, and must not block.
type Spans interface {
	Attempted(a *hooklinev1.Attempt)
}
