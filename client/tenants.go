package client

import (
	"context"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// CreateTenant registers a tenant. Admin token only. Not retried (without
// an id a retry would create a second tenant; with one, hide the first
// behind ALREADY_EXISTS).
func (c *Client) CreateTenant(ctx context.Context, req *controlv1.CreateTenantRequest) (*controlv1.Tenant, error) {
	return call(ctx, c, "create tenant", once, req, c.tenants.CreateTenant)
}

// GetTenant returns a tenant and its keys (never their values): any
// tenant with the admin token, its own with a tenant's key. With req.AsOf
// (an RFC 3339 time or a log position) it returns the tenant, its quota
// and keys as they were then, read from the log. Retried.
func (c *Client) GetTenant(ctx context.Context, req *controlv1.GetTenantRequest) (*controlv1.Tenant, error) {
	return call(ctx, c, "get tenant", idempotent, req, c.tenants.GetTenant)
}

// IssueAPIKey issues an API key for a tenant; the key is in the response
// this once, and Hookline keeps only its hash. Admin token only. Not
// retried (a retry would issue a second key).
func (c *Client) IssueAPIKey(ctx context.Context, req *controlv1.IssueApiKeyRequest) (*controlv1.IssueApiKeyResponse, error) {
	return call(ctx, c, "issue api key", once, req, c.tenants.IssueApiKey)
}

// RevokeAPIKey revokes an API key at once. Admin token only. Retried.
func (c *Client) RevokeAPIKey(ctx context.Context, req *controlv1.RevokeApiKeyRequest) (*controlv1.Tenant, error) {
	return call(ctx, c, "revoke api key", idempotent, req, c.tenants.RevokeApiKey)
}

// ResealSecrets seals every live endpoint secret under the node's current
// master key and retires the keys no secret is sealed under any more: the
// last step of a master key rotation. Admin token only. It takes as long as
// there are endpoints: it is bounded by ctx alone (not
// Config.AttemptTimeout), and not retried; run it again if it did not
// finish.
func (c *Client) ResealSecrets(ctx context.Context) (*controlv1.ResealSecretsResponse, error) {
	return longCall(ctx, c, "reseal secrets", &controlv1.ResealSecretsRequest{}, c.tenants.ResealSecrets)
}

// SetQuota changes a tenant's quota. Admin token only. Retried.
func (c *Client) SetQuota(ctx context.Context, req *controlv1.SetQuotaRequest) (*controlv1.Tenant, error) {
	return call(ctx, c, "set quota", idempotent, req, c.tenants.SetQuota)
}
