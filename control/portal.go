package control

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections/portal"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// PortalTokens finds portal tokens; *portal.Tokens satisfies it.
type PortalTokens interface {
	ByHash(hash []byte) (portal.Token, bool, error)
	Get(id string) (portal.Token, bool, error)
	List(tenantID, cursor string, limit int, keep func(portal.Token) bool) (toks []portal.Token, next string, err error)
}

// portalCaller resolves a portal token into its caller: one lookup of its
// hash in this node's projection, like an API key's. An unknown token
// costs nothing more, whoever sends it: IssuePortalToken answers only
// once every member has applied the token (settle), so a token anyone
// holds is known here already.
func (s *Server) portalCaller(token string) (Caller, error) {
	if s.cfg.Portal == nil {
		return Caller{}, status.Error(codes.Unauthenticated, "portal tokens are not served by this node")
	}
	tok, ok, err := s.cfg.Portal.ByHash(portal.Hash(token))
	if err != nil {
		return Caller{}, toStatus(fmt.Errorf("look up portal token: %w", err))
	}
	if !ok || !tok.Active(s.cfg.Now()) {
		return Caller{}, status.Error(codes.Unauthenticated, "invalid credentials: the portal token is unknown, expired or revoked; ask for a new portal link")
	}
	// A token lives no longer than the API key that issued it: revoking a
	// leaked key also ends the portal tokens made with it.
	if tok.IssuedBy.Kind == int32(hooklinev1.Actor_KIND_API_KEY) {
		live, err := s.cfg.Registry.KeyLive(tok.TenantID, tok.IssuedBy.ID)
		if err != nil {
			return Caller{}, toStatus(fmt.Errorf("look up the issuer of a portal token: %w", err))
		}
		if !live {
			return Caller{}, status.Error(codes.Unauthenticated, "invalid credentials: the API key that issued this portal token was revoked; ask for a new portal link")
		}
	}
	return Caller{TenantID: tok.TenantID, Portal: &tok}, nil
}

// IssuePortalToken issues a portal token for one tenant: by the admin, or
// by the tenant's own API key. A portal token cannot issue another.
func (s *Server) IssuePortalToken(ctx context.Context, req *controlv1.IssuePortalTokenRequest) (*controlv1.IssuePortalTokenResponse, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if s.cfg.Portal == nil {
		return nil, status.Error(codes.Unavailable, "portal tokens are not served by this node")
	}
	caps := []string{portal.Read}
	if ep := req.GetEndpointId(); ep != "" {
		if err := s.checkPullEndpoint(tenantID, ep, req.GetCapabilities()); err != nil {
			return nil, toStatus(err)
		}
		caps = nil
	}
	for i, cp := range req.GetCapabilities() {
		if !slices.Contains(portal.Capabilities, cp) {
			return nil, toStatus(invalid(fmt.Sprintf("capabilities[%d]", i), "%q is not a capability; use %v", cp, portal.Capabilities))
		}
		if !slices.Contains(caps, cp) {
			caps = append(caps, cp)
		}
	}
	ttl := time.Duration(req.GetTtlSeconds()) * time.Second
	switch {
	case req.GetTtlSeconds() == 0:
		ttl = portal.DefaultTTL
	case req.GetTtlSeconds() < 0 || ttl > portal.MaxTTL:
		return nil, toStatus(invalid("ttl_seconds", "is %d; give 1 to %d (0 means %d)", req.GetTtlSeconds(), int(portal.MaxTTL.Seconds()), int(portal.DefaultTTL.Seconds())))
	}
	if len(req.GetLabel()) > 200 {
		return nil, toStatus(invalid("label", "is longer than 200 characters"))
	}
	if _, ok, err := s.cfg.Registry.Tenant(tenantID); err != nil {
		return nil, toStatus(err)
	} else if !ok {
		return nil, toStatus(invalid("tenant_id", "names no tenant"))
	}
	id, token := portal.NewToken()
	now := s.cfg.Now()
	ev := &hooklinev1.PortalTokenIssued{
		TenantId: tenantID, TokenId: id, TokenSha256: portal.Hash(token), Capabilities: caps,
		ExpiresAt: timestamppb.New(now.Add(ttl)), Label: req.GetLabel(), IssuedBy: c.Actor(), At: timestamppb.New(now),
		EndpointId: req.GetEndpointId(),
	}
	e, err := events.Encode(ev, id, "PortalTokenIssued")
	if err != nil {
		return nil, toStatus(err)
	}
	if _, err := s.cfg.Log.Append(ctx, portal.Stream(id), events.NoStream{}, e); err != nil {
		return nil, toStatus(fmt.Errorf("issue portal token: %w", err))
	}
	if err := s.settle(ctx); err != nil {
		return nil, toStatus(err)
	}
	tok, _, err := s.cfg.Portal.Get(id)
	if err != nil {
		return nil, toStatus(err)
	}
	s.cfg.Logger.Info("portal token issued", slog.String("tenant_id", tenantID), slog.String("token_id", id), slog.Any("capabilities", caps))
	return &controlv1.IssuePortalTokenResponse{
		Token: portalView(tok), PortalToken: token, PortalPath: "/console/portal#token=" + token,
	}, nil
}

// ListPortalTokens lists a tenant's portal tokens, newest first, a page at
// a time.
func (s *Server) ListPortalTokens(ctx context.Context, req *controlv1.ListPortalTokensRequest) (*controlv1.ListPortalTokensResponse, error) {
	tenantID, _, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if err := checkPage("page_size", req.GetPageSize(), 500, 100); err != nil {
		return nil, toStatus(err)
	}
	if s.cfg.Portal == nil {
		return nil, status.Error(codes.Unavailable, "portal tokens are not served by this node")
	}
	var keep func(portal.Token) bool
	if !req.GetIncludeInactive() {
		now := s.cfg.Now()
		keep = func(t portal.Token) bool { return t.Active(now) }
	}
	toks, next, err := s.cfg.Portal.List(tenantID, req.GetCursor(), int(req.GetPageSize()), keep)
	if errors.Is(err, portal.ErrBadCursor) {
		return nil, toStatus(invalid("cursor", "is not a cursor of this list; pass next_cursor from the previous page unchanged"))
	}
	if err != nil {
		return nil, toStatus(err)
	}
	out := &controlv1.ListPortalTokensResponse{NextCursor: next}
	for _, t := range toks {
		out.Tokens = append(out.Tokens, portalView(t))
	}
	return out, nil
}

// RevokePortalToken ends a portal token at once. Revoking a revoked token
// changes nothing.
func (s *Server) RevokePortalToken(ctx context.Context, req *controlv1.RevokePortalTokenRequest) (*controlv1.PortalToken, error) {
	tenantID, c, err := tenantFor(ctx, req.GetTenantId())
	if err != nil {
		return nil, err
	}
	if s.cfg.Portal == nil {
		return nil, status.Error(codes.Unavailable, "portal tokens are not served by this node")
	}
	tok, ok, err := s.cfg.Portal.Get(req.GetTokenId())
	if err != nil {
		return nil, toStatus(err)
	}
	if !ok || tok.TenantID != tenantID {
		return nil, status.Errorf(codes.NotFound, "token_id %q: no such portal token for this tenant", req.GetTokenId())
	}
	if tok.Revoked {
		return portalView(tok), nil
	}
	ev := &hooklinev1.PortalTokenRevoked{TenantId: tenantID, TokenId: tok.ID, IssuedBy: c.Actor(), At: timestamppb.New(s.cfg.Now())}
	e, err := events.Encode(ev, tok.ID, "PortalTokenRevoked")
	if err != nil {
		return nil, toStatus(err)
	}
	// The stream holds PortalTokenIssued at revision 0; a revocation
	// already there (another node's) makes this append a no-op or a wrong
	// revision, and either way the token is revoked.
	if _, err := s.cfg.Log.Append(ctx, portal.Stream(tok.ID), events.Exact(0), e); err != nil && !errors.Is(err, events.ErrWrongRevision) {
		return nil, toStatus(fmt.Errorf("revoke portal token: %w", err))
	}
	if err := s.settle(ctx); err != nil {
		return nil, toStatus(err)
	}
	if tok, _, err = s.cfg.Portal.Get(tok.ID); err != nil {
		return nil, toStatus(err)
	}
	s.cfg.Logger.Info("portal token revoked", slog.String("tenant_id", tenantID), slog.String("token_id", tok.ID))
	return portalView(tok), nil
}

// GetSession tells the caller what its token is and allows.
func (s *Server) GetSession(ctx context.Context, _ *controlv1.GetSessionRequest) (*controlv1.Session, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return nil, status.Error(codes.Unauthenticated, "missing credentials")
	}
	out := &controlv1.Session{TenantId: c.TenantID, AuditUi: s.cfg.AuditUI}
	switch {
	case c.Admin:
		out.Kind = "admin"
	case c.Portal != nil:
		out.Kind, out.Id, out.ExpiresAt = "portal_token", c.Portal.ID, timestamppb.New(c.Portal.ExpiresAt)
		for _, cp := range portal.Capabilities {
			if c.Portal.Has(cp) {
				out.Capabilities = append(out.Capabilities, cp)
			}
		}
	default:
		out.Kind, out.Id, out.Capabilities = "api_key", c.KeyID, slices.Clone(portal.Capabilities)
	}
	return out, nil
}

func portalView(t portal.Token) *controlv1.PortalToken {
	return &controlv1.PortalToken{
		TokenId: t.ID, TenantId: t.TenantID, Capabilities: t.Capabilities, Label: t.Label,
		CreatedAt: ts(t.CreatedAt), ExpiresAt: ts(t.ExpiresAt), Revoked: t.Revoked,
		IssuedBy:   &hooklinev1.Actor{Kind: hooklinev1.Actor_Kind(t.IssuedBy.Kind), Id: t.IssuedBy.ID},
		EndpointId: t.EndpointID,
	}
}

// checkPullEndpoint refuses a pull token for anything but a pull endpoint
// of the tenant, or with capabilities.
func (s *Server) checkPullEndpoint(tenantID, endpointID string, caps []string) error {
	if len(caps) > 0 {
		return invalid("capabilities", "are given with endpoint_id: a pull token only pulls its endpoint; leave capabilities out, or endpoint_id for a portal token")
	}
	e, ok, err := s.cfg.Registry.Endpoint(endpointID)
	switch {
	case err != nil:
		return err
	case !ok || e.TenantID != tenantID || e.Deleted:
		return invalid("endpoint_id", "names no endpoint of tenant %s", tenantID)
	case !e.Config.GetPull():
		return invalid("endpoint_id", "%s is a push endpoint; a pull token is for an endpoint whose settings.delivery is \"pull\"", endpointID)
	}
	return nil
}
