package control

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/cluster/portal"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// Caller is who made a request: the admin, one API key of one tenant, or
// one portal token of one tenant (Portal set; see portal.go).
type Caller struct {
	Admin    bool
	TenantID string
	KeyID    string
	Portal   *portal.Token
}

// Actor is the caller as recorded in events (issued_by).
func (c Caller) Actor() *hooklinev1.Actor {
	if c.Admin {
		return &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_ADMIN, Id: "admin"}
	}
	if c.Portal != nil {
		return &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_PORTAL_TOKEN, Id: c.Portal.ID}
	}
	return &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_API_KEY, Id: c.KeyID}
}

type callerKey struct{}

// CallerFrom returns the authenticated caller of a request.
func CallerFrom(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// HashKey returns the SHA-256 of an API key, the form in which keys are
// stored and looked up.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// authenticate is the unary interceptor that resolves the bearer token of
// every call except health checks and reflection.
func (s *Server) authenticate(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if strings.HasPrefix(info.FullMethod, "/"+grpc_health_v1.Health_ServiceDesc.ServiceName+"/") {
		return handler(ctx, req)
	}
	c, err := s.caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := allow(c, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(context.WithValue(ctx, callerKey{}, c), req)
}

func (s *Server) caller(ctx context.Context) (Caller, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var token string
	for _, v := range md.Get("authorization") {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			token = strings.TrimSpace(t)
			break
		}
	}
	if token == "" {
		return Caller{}, status.Error(codes.Unauthenticated, "missing credentials: send the header 'Authorization: Bearer <admin token or API key>'")
	}
	if strings.HasPrefix(token, portal.TokenPrefix) {
		return s.portalCaller(ctx, token)
	}
	if s.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(token), []byte(s.cfg.AdminToken)) == 1 {
		return Caller{Admin: true}, nil
	}
	// Keys are looked up by their hash, so comparing secrets never happens
	// on the clear key: timing reveals nothing about stored keys.
	tenantID, keyID, ok, err := s.cfg.Registry.TenantByKeyHash(HashKey(token))
	if err != nil {
		return Caller{}, toStatus(fmt.Errorf("look up api key: %w", err))
	}
	if !ok {
		return Caller{}, status.Error(codes.Unauthenticated, "invalid credentials: the bearer token is neither the admin token nor a live API key")
	}
	return Caller{TenantID: tenantID, KeyID: keyID}, nil
}

// tenantFor returns the tenant a request acts on: a tenant key's own tenant
// (a different tenant_id in the request is refused), or for the admin the
// tenant_id the request names.
func tenantFor(ctx context.Context, requested string) (string, Caller, error) {
	c, ok := CallerFrom(ctx)
	if !ok {
		return "", c, status.Error(codes.Unauthenticated, "missing credentials")
	}
	if c.Admin {
		if requested == "" {
			return "", c, toStatus(invalid("tenant_id", "is required with the admin token: name the tenant to act for"))
		}
		return requested, c, nil
	}
	if requested != "" && requested != c.TenantID {
		return "", c, status.Error(codes.PermissionDenied, "tenant_id: this API key belongs to another tenant; leave tenant_id empty or use that tenant's key")
	}
	return c.TenantID, c, nil
}

// requireAdmin refuses callers that are not the admin.
func requireAdmin(ctx context.Context) (Caller, error) {
	c, ok := CallerFrom(ctx)
	if !ok || !c.Admin {
		return c, status.Error(codes.PermissionDenied, "this call needs the admin token (HOOKLINE_ADMIN_TOKEN)")
	}
	return c, nil
}
