package client

import (
	"context"
	"iter"

	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// In every request below, TenantId is required with the admin token and
// may be left empty with a tenant's API key.

// CreateEndpoint registers an endpoint; the response carries its signing
// secret, shown this once. Not retried (a retry would register a second
// endpoint, or hide the first behind ALREADY_EXISTS).
func (c *Client) CreateEndpoint(ctx context.Context, req *controlv1.CreateEndpointRequest) (*controlv1.CreateEndpointResponse, error) {
	return call(ctx, c, "create endpoint", once, req, c.endpoints.CreateEndpoint)
}

// GetEndpoint returns an endpoint (never its secrets' values). With
// req.AsOf (an RFC 3339 time or a log position) it returns the endpoint as
// it was then, read from the log. Retried.
func (c *Client) GetEndpoint(ctx context.Context, req *controlv1.GetEndpointRequest) (*controlv1.Endpoint, error) {
	return call(ctx, c, "get endpoint", idempotent, req, c.endpoints.GetEndpoint)
}

// ListEndpoints returns one page of endpoints and the cursor of the next
// (empty on the last). Retried.
func (c *Client) ListEndpoints(ctx context.Context, req *controlv1.ListEndpointsRequest) (*controlv1.ListEndpointsResponse, error) {
	return call(ctx, c, "list endpoints", idempotent, req, c.endpoints.ListEndpoints)
}

// Endpoints iterates over all the endpoints that req selects, from its
// cursor on, page after page. It stops at the first error, which it yields.
func (c *Client) Endpoints(ctx context.Context, req *controlv1.ListEndpointsRequest) iter.Seq2[*controlv1.Endpoint, error] {
	return func(yield func(*controlv1.Endpoint, error) bool) {
		q := &controlv1.ListEndpointsRequest{}
		if req != nil {
			q = proto.CloneOf(req)
		}
		yieldPages(yield, func() ([]*controlv1.Endpoint, bool, error) {
			page, err := c.ListEndpoints(ctx, q)
			q.Cursor = page.GetNextCursor()
			return page.GetEndpoints(), q.Cursor != "", err
		})
	}
}

// UpdateEndpoint changes the settings named by req.UpdateMask and raises
// the endpoint's config version. Retried (the same change again leaves the
// same settings; the version may rise once more).
func (c *Client) UpdateEndpoint(ctx context.Context, req *controlv1.UpdateEndpointRequest) (*controlv1.Endpoint, error) {
	return call(ctx, c, "update endpoint", idempotent, req, c.endpoints.UpdateEndpoint)
}

// PauseEndpoint holds an endpoint's deliveries. Retried.
func (c *Client) PauseEndpoint(ctx context.Context, req *controlv1.PauseEndpointRequest) (*controlv1.Endpoint, error) {
	return call(ctx, c, "pause endpoint", idempotent, req, c.endpoints.PauseEndpoint)
}

// ResumeEndpoint resumes a paused endpoint. Retried.
func (c *Client) ResumeEndpoint(ctx context.Context, req *controlv1.ResumeEndpointRequest) (*controlv1.Endpoint, error) {
	return call(ctx, c, "resume endpoint", idempotent, req, c.endpoints.ResumeEndpoint)
}

// DeleteEndpoint deletes an endpoint. Retried.
func (c *Client) DeleteEndpoint(ctx context.Context, req *controlv1.DeleteEndpointRequest) (*controlv1.Endpoint, error) {
	return call(ctx, c, "delete endpoint", idempotent, req, c.endpoints.DeleteEndpoint)
}

// RotateSecret adds a new signing secret, returned this once; the previous
// one signs beside it until the overlap ends. Not retried (a retry would
// rotate twice).
func (c *Client) RotateSecret(ctx context.Context, req *controlv1.RotateSecretRequest) (*controlv1.RotateSecretResponse, error) {
	return call(ctx, c, "rotate secret", once, req, c.endpoints.RotateSecret)
}

// RetireSecret retires an old secret before its overlap ends. Retried.
func (c *Client) RetireSecret(ctx context.Context, req *controlv1.RetireSecretRequest) (*controlv1.Endpoint, error) {
	return call(ctx, c, "retire secret", idempotent, req, c.endpoints.RetireSecret)
}

// RecoverEndpoint starts a background job that replays the endpoint's
// deliveries planned in [req.Since, req.Until) that match req.Statuses
// (failed by default) and req.EventTypes, with their original webhook-ids.
// With req.DryRun it only answers the manifest (count, digest of the exact
// list, time under the rate limit); with req.Digest set to that digest it
// replays exactly that list, or fails with a FailedPrecondition naming
// digest when the window no longer gives it. Not retried (a retry would
// start a second job).
func (c *Client) RecoverEndpoint(ctx context.Context, req *controlv1.RecoverEndpointRequest) (*controlv1.Recovery, error) {
	return call(ctx, c, "recover endpoint", once, req, c.endpoints.RecoverEndpoint)
}

// GetRecovery returns the progress of a recovery job. Retried.
func (c *Client) GetRecovery(ctx context.Context, req *controlv1.GetRecoveryRequest) (*controlv1.Recovery, error) {
	return call(ctx, c, "get recovery", idempotent, req, c.endpoints.GetRecovery)
}

// ListRecoveries returns an endpoint's recovery jobs, running and done.
// Retried.
func (c *Client) ListRecoveries(ctx context.Context, req *controlv1.ListRecoveriesRequest) (*controlv1.ListRecoveriesResponse, error) {
	return call(ctx, c, "list recoveries", idempotent, req, c.endpoints.ListRecoveries)
}

// ListOrderingKeys lists an endpoint's ordering keys that have a head
// delivery (state "blocked", the default, or "all"). Retried.
func (c *Client) ListOrderingKeys(ctx context.Context, req *controlv1.ListOrderingKeysRequest) (*controlv1.ListOrderingKeysResponse, error) {
	return call(ctx, c, "list ordering keys", idempotent, req, c.endpoints.ListOrderingKeys)
}

// SkipOrderingKey ends an ordering key's head delivery so that the key's
// next one goes. Retried only with HeadDeliveryId set: a retry then finds
// the key moved on and is refused instead of skipping its next head.
func (c *Client) SkipOrderingKey(ctx context.Context, req *controlv1.SkipOrderingKeyRequest) (*controlv1.OrderingKey, error) {
	r := once
	if req.GetHeadDeliveryId() != "" {
		r = idempotent
	}
	return call(ctx, c, "skip ordering key", r, req, c.endpoints.SkipOrderingKey)
}

// Pull leases up to req.Max due deliveries of a pull endpoint, each with
// the headers and body a push would send (check them with package
// verify), waiting up to req.WaitSeconds when none is due. Not retried: a
// retry would lease others (those of a lost answer are offered again once
// their lease ends).
func (c *Client) Pull(ctx context.Context, req *controlv1.PullDeliveriesRequest) (*controlv1.PullDeliveriesResponse, error) {
	return call(ctx, c, "pull deliveries", once, req, c.endpoints.PullDeliveries)
}

// Ack acknowledges leased deliveries: each succeeds. Retried: an id
// acknowledged already comes back in NotAcked.
func (c *Client) Ack(ctx context.Context, req *controlv1.AckDeliveriesRequest) (*controlv1.AckDeliveriesResponse, error) {
	return call(ctx, c, "ack deliveries", idempotent, req, c.endpoints.AckDeliveries)
}

// Seek offers again a pull endpoint's deliveries planned since a time, as
// a recovery job. Not retried (a retry would start a second job).
func (c *Client) Seek(ctx context.Context, req *controlv1.SeekDeliveriesRequest) (*controlv1.Recovery, error) {
	return call(ctx, c, "seek deliveries", once, req, c.endpoints.SeekDeliveries)
}
