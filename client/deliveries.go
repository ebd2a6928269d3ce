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
		yieldPages(yield, func() ([]*controlv1.Delivery, bool, error) {
			page, err := c.ListDeliveries(ctx, q)
			q.Cursor = page.GetNextCursor()
			return page.GetDeliveries(), q.Cursor != "", err
		})
	}
}

// yieldPages yields the items of the pages that next reads, one page after
// the other while next says more come, until yield says stop. It stops at
// the first error, which it yields.
func yieldPages[T any](yield func(T, error) bool, next func() (items []T, more bool, err error)) {
	for {
		items, more, err := next()
		if err != nil {
			var zero T
			yield(zero, err)
			return
		}
		for _, it := range items {
			if !yield(it, nil) {
				return
			}
		}
		if !more {
			return
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
