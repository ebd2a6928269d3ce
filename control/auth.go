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
	"google.golang.org/grpc/tap"

	"github.com/hookline/hookline/projections/portal"
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

// Authentication happens before a request's body is read, under a small
// bound of its own (limiter.authenticate): until a call's caller is known,
// no per-caller limit can apply to it. Over gRPC,
// the tap (authenticateStream's InTapHandle) resolves the bearer token from
// the headers alone, when a call's stream opens: a call without valid
// credentials is refused before its message is received, let alone
// decoded, and so is a call over the caller's or the node's bound of calls
// in flight. The unary and stream interceptors then find the caller in the
// context. Over REST the same check runs in the handler before the body
// (see gateway.go). Only health checks are open to anyone.

// isOpen reports whether a gRPC method needs no credentials: health
// checks, which load balancers make.
func isOpen(fullMethod string) bool {
	return strings.HasPrefix(fullMethod, "/"+grpc_health_v1.Health_ServiceDesc.ServiceName+"/")
}

// tap is the gRPC InTapHandle: it authenticates a call from its headers
// and admits it under the limits, before any of its message is read. The
// call's slot is freed when its handler returns (see withSlot).
func (s *Server) tap(ctx context.Context, info *tap.Info) (context.Context, error) {
	if isOpen(info.FullMethodName) {
		return ctx, nil
	}
	if err := s.awaitReady(ctx); err != nil {
		return nil, err
	}
	c, err := s.grpcLimits.authenticate(func() (Caller, error) {
		return s.callerFromToken(bearer(info.Header.Get("authorization")...))
	})
	if err != nil {
		return nil, err
	}
	if err := allow(c, info.FullMethodName); err != nil {
		return nil, err
	}
	release, err := s.grpcLimits.acquire(c)
	if err != nil {
		return nil, err
	}
	return context.WithValue(withSlot(ctx, release), callerKey{}, c), nil
}

// authenticate is the unary interceptor: the tap has put the caller in the
// context of every call but health checks. A server built without the tap
// (NewGRPCServer always installs it) would still authenticate here.
func (s *Server) authenticate(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if isOpen(info.FullMethod) {
		return handler(ctx, req)
	}
	defer releaseSlot(ctx) // before the answer is sent
	c, ok := CallerFrom(ctx)
	if !ok {
		md, _ := metadata.FromIncomingContext(ctx)
		var err error
		if c, err = s.callerFromToken(bearer(md.Get("authorization")...)); err != nil {
			return nil, err
		}
		ctx = context.WithValue(ctx, callerKey{}, c)
	}
	// The tap checked it already; a portal token's capabilities are the
	// one check no call may skip.
	if err := allow(c, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// authenticateStream is the stream interceptor: server reflection, the one
// streaming service besides health, needs credentials like any call.
func (s *Server) authenticateStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if _, ok := CallerFrom(ss.Context()); ok || isOpen(info.FullMethod) {
		return handler(srv, ss)
	}
	md, _ := metadata.FromIncomingContext(ss.Context())
	c, err := s.callerFromToken(bearer(md.Get("authorization")...))
	if err != nil {
		return err
	}
	if err := allow(c, info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// bearer returns the token of the first "Bearer" authorization value.
func bearer(values ...string) string {
	for _, v := range values {
		if t, ok := strings.CutPrefix(v, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
	}
	return ""
}

// callerFromToken resolves a bearer token: a portal token, the admin
// token, compared in constant time, or a live API key, looked up by its
// hash. Each costs one local lookup at most, whatever the token: no read
// of the log, no call to another member. Errors are gRPC statuses.
func (s *Server) callerFromToken(token string) (Caller, error) {
	if token == "" {
		return Caller{}, status.Error(codes.Unauthenticated, "missing credentials: send the header 'Authorization: Bearer <admin token or API key>'")
	}
	if strings.HasPrefix(token, portal.TokenPrefix) {
		return s.portalCaller(token)
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
		// Stream names are built from it (event-{tenant}.{event}): "a.b"
		// with event "c" and "a" with event "b.c" would name one stream.
		if err := checkID("tenant_id", requested); err != nil {
			return "", c, toStatus(err)
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
