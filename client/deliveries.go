package client

import (
	"context"
	"iter"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// ListDeliveries returns one page of the deliveries that req selects,
// newest first, and the cursor of the next page (empty on the last).
// Retried.
func (c *Client) ListDeliveries(ctx context.Context, req *controlv1.ListDeliveriesRequest) (*controlv1.ListDeliveriesResponse, error) {
	return call(ctx, c, "list deliveries", idempotent, req, c.deliveries.ListDeliveries)
}

// Deliveries iterates over all the deliveries that req selects (endpoint,
// status, event type, time range), newest first, from its cursor on,
// following the cursors page after page (req.PageSize each). It stops at
// the first error, which it yields:
//
//	for d, err := range c.Deliveries(ctx, &controlv1.ListDeliveriesRequest{Status: "failed"}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(d.GetDeliveryId())
//	}
func (c *Client) Deliveries(ctx context.Context, req *controlv1.ListDeliveriesRequest) iter.Seq2[*controlv1.Delivery, error] {
	return func(yield func(*controlv1.Delivery, error) bool) {
		q := &controlv1.ListDeliveriesRequest{}
		if req != nil {
			q = proto.CloneOf(req)
		}
		for {
			page, err := c.ListDeliveries(ctx, q)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, d := range page.GetDeliveries() {
				if !yield(d, nil) {
					return
				}
			}
			if page.GetNextCursor() == "" {
				return
			}
			q.Cursor = page.GetNextCursor()
		}
	}
}

// GetDelivery returns a delivery with its attempts, oldest first. Retried.
func (c *Client) GetDelivery(ctx context.Context, req *controlv1.GetDeliveryRequest) (*controlv1.Delivery, error) {
	return call(ctx, c, "get delivery", idempotent, req, c.deliveries.GetDelivery)
}

// ReplayDelivery makes one manual attempt of a delivery, with the same
// webhook-id, signed with the current secret. Not retried (a retry would
// make a second attempt).
func (c *Client) ReplayDelivery(ctx context.Context, req *controlv1.ReplayDeliveryRequest) (*controlv1.Delivery, error) {
	return call(ctx, c, "replay delivery", once, req, c.deliveries.ReplayDelivery)
}
