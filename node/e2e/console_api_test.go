package e2e_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

func bearer(t *testing.T, token string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
}

func wantCode(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}

// TestConsoleAPI drives the API the console added, on a whole node:
// portal tokens with their capabilities, revocation and expiry; the
// operator's tenants, cluster and audit views; endpoint health.
func TestConsoleAPI(t *testing.T) {
	n := startE2E(t, node.Config{})
	rc := newHookReceiver(t, nil)
	acme, beta := n.tenant(t, "acme", nil), n.tenant(t, "beta", nil)
	acme.endpoint(t, rc, "ep_acme", []string{"order.created"}, nil, answer(http.StatusOK))
	beta.endpoint(t, rc, "ep_beta", []string{"order.created"}, nil, answer(http.StatusOK))
	dlv := acme.publish(t, "evt_1", "order.created")[0]
	acme.waitDelivery(t, dlv, "succeeded", hasStatus("succeeded"))

	portal := controlv1.NewPortalServiceClient(n.cc)
	eps := controlv1.NewEndpointServiceClient(n.cc)
	deliveries := controlv1.NewDeliveryServiceClient(n.cc)
	admin := bearer(t, e2eAdmin)

	issued, err := portal.IssuePortalToken(acme.ctx(), &controlv1.IssuePortalTokenRequest{Capabilities: []string{"manage_endpoints"}, Label: "customer 42"})
	if err != nil {
		t.Fatal(err)
	}
	tok := issued.GetPortalToken()
	as := bearer(t, tok)

	t.Run("issue", func(t *testing.T) {
		if !strings.HasPrefix(tok, "hlp_") || issued.GetPortalPath() != "/console/portal#token="+tok {
			t.Errorf("token %q, path %q", tok, issued.GetPortalPath())
		}
		life := issued.GetToken().GetExpiresAt().AsTime().Sub(issued.GetToken().GetCreatedAt().AsTime())
		if life != time.Hour || issued.GetToken().GetTenantId() != "acme" {
			t.Errorf("token lives %v for %q, want 1h for acme", life, issued.GetToken().GetTenantId())
		}
		s, err := portal.GetSession(as, &controlv1.GetSessionRequest{})
		if err != nil || s.GetKind() != "portal_token" || s.GetTenantId() != "acme" || strings.Join(s.GetCapabilities(), ",") != "read,manage_endpoints" {
			t.Errorf("session = %v, %v", s, err)
		}
		_, err = portal.IssuePortalToken(acme.ctx(), &controlv1.IssuePortalTokenRequest{Capabilities: []string{"admin"}})
		wantCode(t, "unknown capability", err, codes.InvalidArgument)
		_, err = portal.IssuePortalToken(acme.ctx(), &controlv1.IssuePortalTokenRequest{TtlSeconds: 86401})
		wantCode(t, "ttl over 24 h", err, codes.InvalidArgument)
		_, err = portal.IssuePortalToken(admin, &controlv1.IssuePortalTokenRequest{TenantId: "nobody"})
		wantCode(t, "admin for an unknown tenant", err, codes.InvalidArgument)
	})

	t.Run("capabilities", func(t *testing.T) {
		if _, err := eps.ListEndpoints(as, &controlv1.ListEndpointsRequest{}); err != nil {
			t.Errorf("read: %v", err)
		}
		created, err := eps.CreateEndpoint(as, &controlv1.CreateEndpointRequest{EndpointId: "ep_portal",
			Settings: &controlv1.EndpointSettings{Url: rc.url("/ep_portal"), EventTypes: []string{"x.y"}}})
		if err != nil {
			t.Fatalf("manage_endpoints: %v", err)
		}
		if created.GetSecret() == "" {
			t.Error("the portal did not get the new endpoint's secret")
		}
		_, err = deliveries.ReplayDelivery(as, &controlv1.ReplayDeliveryRequest{DeliveryId: dlv})
		wantCode(t, "replay without the capability", err, codes.PermissionDenied)
		_, err = eps.RecoverEndpoint(as, &controlv1.RecoverEndpointRequest{EndpointId: acme.ids["ep_acme"]})
		wantCode(t, "recover without the capability", err, codes.PermissionDenied)
		_, err = controlv1.NewEventServiceClient(n.cc).Publish(as, &controlv1.PublishRequest{EventId: "p1", Type: "x.y", Payload: []byte("{}")})
		wantCode(t, "publish", err, codes.PermissionDenied)
		_, err = portal.IssuePortalToken(as, &controlv1.IssuePortalTokenRequest{})
		wantCode(t, "a portal token issuing another", err, codes.PermissionDenied)
		_, err = controlv1.NewTenantServiceClient(n.cc).GetTenant(as, &controlv1.GetTenantRequest{})
		wantCode(t, "the tenant (its API keys)", err, codes.PermissionDenied)
		_, err = controlv1.NewOperatorServiceClient(n.cc).ListTenants(as, &controlv1.ListTenantsRequest{})
		wantCode(t, "list tenants", err, codes.PermissionDenied)
		_, err = eps.GetEndpoint(as, &controlv1.GetEndpointRequest{EndpointId: beta.ids["ep_beta"]})
		wantCode(t, "another tenant's endpoint", err, codes.NotFound)
		_, err = eps.ListEndpoints(as, &controlv1.ListEndpointsRequest{TenantId: "beta"})
		wantCode(t, "naming another tenant", err, codes.PermissionDenied)

		// The log records the portal token as the issuer, and never the
		// token itself.
		stream := "endpoint-" + created.GetEndpoint().GetEndpointId() // a chosen id gets its tenant's tag
		page, err := controlv1.NewAuditServiceClient(n.cc).ReadStream(admin, &controlv1.ReadStreamRequest{Stream: stream})
		if err != nil || len(page.GetEvents()) == 0 {
			t.Fatalf("read %s: %v", stream, err)
		}
		by := page.GetEvents()[0].GetIssuedBy()
		if by.GetKind() != hooklinev1.Actor_KIND_PORTAL_TOKEN || by.GetId() != issued.GetToken().GetTokenId() {
			t.Errorf("EndpointCreated issued by %v, want the portal token %s", by, issued.GetToken().GetTokenId())
		}
		tp, err := controlv1.NewAuditServiceClient(n.cc).ReadStream(admin, &controlv1.ReadStreamRequest{Stream: "portal-" + issued.GetToken().GetTokenId()})
		if err != nil {
			t.Fatal(err)
		}
		if js, _ := protojson.Marshal(tp); strings.Contains(string(js), strings.TrimPrefix(tok, "hlp_")) || !strings.Contains(string(js), "token_sha256") {
			t.Errorf("the portal stream holds the token or lacks its hash: %s", js)
		}
	})

	t.Run("list and revoke", func(t *testing.T) {
		_, err := portal.RevokePortalToken(beta.ctx(), &controlv1.RevokePortalTokenRequest{TokenId: issued.GetToken().GetTokenId()})
		wantCode(t, "another tenant revoking", err, codes.NotFound)
		l, err := portal.ListPortalTokens(acme.ctx(), &controlv1.ListPortalTokensRequest{})
		if err != nil || len(l.GetTokens()) != 1 || l.GetTokens()[0].GetLabel() != "customer 42" {
			t.Fatalf("list = %v, %v", l, err)
		}
		r, err := portal.RevokePortalToken(acme.ctx(), &controlv1.RevokePortalTokenRequest{TokenId: issued.GetToken().GetTokenId()})
		if err != nil || !r.GetRevoked() {
			t.Fatalf("revoke = %v, %v", r, err)
		}
		_, err = eps.ListEndpoints(as, &controlv1.ListEndpointsRequest{})
		wantCode(t, "a revoked token", err, codes.Unauthenticated)
		if r, err := portal.RevokePortalToken(acme.ctx(), &controlv1.RevokePortalTokenRequest{TokenId: issued.GetToken().GetTokenId()}); err != nil || !r.GetRevoked() {
			t.Errorf("revoke again = %v, %v", r, err)
		}
		l, _ = portal.ListPortalTokens(acme.ctx(), &controlv1.ListPortalTokensRequest{})
		all, _ := portal.ListPortalTokens(acme.ctx(), &controlv1.ListPortalTokensRequest{IncludeInactive: true})
		if len(l.GetTokens()) != 0 || len(all.GetTokens()) != 1 {
			t.Errorf("active %d, all %d; want 0 and 1", len(l.GetTokens()), len(all.GetTokens()))
		}
	})

	t.Run("expiry", func(t *testing.T) {
		short, err := portal.IssuePortalToken(admin, &controlv1.IssuePortalTokenRequest{TenantId: "acme", TtlSeconds: 1, Capabilities: []string{"replay"}})
		if err != nil {
			t.Fatal(err)
		}
		ctx := bearer(t, short.GetPortalToken())
		if _, err := deliveries.ReplayDelivery(ctx, &controlv1.ReplayDeliveryRequest{DeliveryId: dlv}); err != nil {
			t.Fatalf("replay with the replay capability: %v", err)
		}
		acme.waitDelivery(t, dlv, "the replay attempted", hasAttempts(2))
		eventually(t, 5*time.Second, "the 1 s token expires", func() bool {
			_, err := eps.ListEndpoints(ctx, &controlv1.ListEndpointsRequest{})
			return status.Code(err) == codes.Unauthenticated
		})
	})

	t.Run("revoking the issuing API key ends its portal tokens", func(t *testing.T) {
		tenants := controlv1.NewTenantServiceClient(n.cc)
		k, err := tenants.IssueApiKey(admin, &controlv1.IssueApiKeyRequest{TenantId: "beta", Name: "leaks"})
		if err != nil {
			t.Fatal(err)
		}
		byKey, err := portal.IssuePortalToken(bearer(t, k.GetApiKey()), &controlv1.IssuePortalTokenRequest{})
		if err != nil {
			t.Fatal(err)
		}
		byAdmin, err := portal.IssuePortalToken(admin, &controlv1.IssuePortalTokenRequest{TenantId: "beta"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := portal.GetSession(bearer(t, byKey.GetPortalToken()), &controlv1.GetSessionRequest{}); err != nil {
			t.Fatalf("before the key's revocation: %v", err)
		}
		if _, err := tenants.RevokeApiKey(admin, &controlv1.RevokeApiKeyRequest{TenantId: "beta", KeyId: k.GetKeyId()}); err != nil {
			t.Fatal(err)
		}
		_, err = portal.GetSession(bearer(t, byKey.GetPortalToken()), &controlv1.GetSessionRequest{})
		wantCode(t, "a token of a revoked key", err, codes.Unauthenticated)
		if _, err := portal.GetSession(bearer(t, byAdmin.GetPortalToken()), &controlv1.GetSessionRequest{}); err != nil {
			t.Errorf("a token the admin issued, after a key's revocation: %v", err)
		}
	})

	t.Run("operator views", func(t *testing.T) {
		op := controlv1.NewOperatorServiceClient(n.cc)
		p1, err := op.ListTenants(admin, &controlv1.ListTenantsRequest{PageSize: 1})
		if err != nil || len(p1.GetTenants()) != 1 || p1.GetTenants()[0].GetTenantId() != "acme" || p1.GetNextCursor() == "" {
			t.Fatalf("page 1 = %v, %v", p1, err)
		}
		p2, err := op.ListTenants(admin, &controlv1.ListTenantsRequest{PageSize: 1, Cursor: p1.GetNextCursor()})
		if err != nil || len(p2.GetTenants()) != 1 || p2.GetTenants()[0].GetTenantId() != "beta" || p2.GetNextCursor() != "" {
			t.Fatalf("page 2 = %v, %v", p2, err)
		}
		_, err = op.ListTenants(acme.ctx(), &controlv1.ListTenantsRequest{})
		wantCode(t, "a tenant key listing tenants", err, codes.PermissionDenied)
		st, err := op.GetClusterStatus(admin, &controlv1.GetClusterStatusRequest{})
		if err != nil || len(st.GetNodes()) != 1 || st.GetUnserved() != 0 || st.GetStore() != "embedded" {
			t.Fatalf("cluster = %v, %v", st, err)
		}
		if nd := st.GetNodes()[0]; !nd.GetAnswered() || nd.GetPartitionsLive() != 256 || nd.GetGrains()["endpoint"] < 1 || nd.GetSlots() == 0 {
			t.Errorf("node = %v", nd)
		}
	})

	t.Run("audit", func(t *testing.T) {
		audit := controlv1.NewAuditServiceClient(n.cc)
		tr, err := audit.TraceDelivery(admin, &controlv1.TraceDeliveryRequest{TenantId: "acme", DeliveryId: dlv})
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range tr.GetEvents() {
			types = append(types, e.GetType())
		}
		if got := strings.Join(types, ","); got != "EventPublished,DeliveriesPlanned,AttemptSucceeded,ReplayRequested,AttemptSucceeded" {
			t.Errorf("trace = %s", got)
		}
		if d := tr.GetEvents()[0].GetData().GetFields()["event_id"].GetStringValue(); d != "evt_1" {
			t.Errorf("EventPublished decoded event_id = %q", d)
		}
		_, err = audit.TraceDelivery(acme.ctx(), &controlv1.TraceDeliveryRequest{TenantId: "acme", DeliveryId: dlv})
		wantCode(t, "a tenant key tracing", err, codes.PermissionDenied)

		back, err := audit.ReadStream(admin, &controlv1.ReadStreamRequest{Stream: "delivery-" + dlv, Backwards: true, PageSize: 2})
		if err != nil || len(back.GetEvents()) != 2 || back.GetEvents()[0].GetRevision() != 2 || back.GetNextCursor() != "0" {
			t.Fatalf("backwards page = %v, %v", back, err)
		}
		rest, err := audit.ReadStream(admin, &controlv1.ReadStreamRequest{Stream: "delivery-" + dlv, Backwards: true, PageSize: 2, Cursor: back.GetNextCursor()})
		if err != nil || len(rest.GetEvents()) != 1 || rest.GetNextCursor() != "" {
			t.Fatalf("last page = %v, %v", rest, err)
		}
		_, err = audit.ReadStream(admin, &controlv1.ReadStreamRequest{Stream: "endpoint-nope"})
		wantCode(t, "an unknown stream", err, codes.NotFound)

		var portalEvents []string
		for cursor := ""; ; {
			page, err := audit.ReadCategory(admin, &controlv1.ReadCategoryRequest{Category: "portal", PageSize: 1, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page.GetEvents() {
				portalEvents = append(portalEvents, e.GetType())
			}
			if cursor = page.GetNextCursor(); cursor == "" {
				break
			}
		}
		if got := strings.Join(portalEvents, ","); got != "PortalTokenIssued,PortalTokenRevoked,PortalTokenIssued,PortalTokenIssued,PortalTokenIssued" {
			t.Errorf("category portal, a page of one at a time = %s", got)
		}
		_, err = audit.ReadCategory(admin, &controlv1.ReadCategoryRequest{Category: "Bad-one"})
		wantCode(t, "a bad category", err, codes.InvalidArgument)
	})

	t.Run("endpoint health", func(t *testing.T) {
		hl, err := controlv1.NewEndpointHealthServiceClient(n.cc).GetEndpointHealth(acme.ctx(), &controlv1.GetEndpointHealthRequest{EndpointId: acme.ids["ep_acme"]})
		if err != nil {
			t.Fatal(err)
		}
		if hl.GetSucceeded() != 1 || hl.GetSuccessRate() != 1 || len(hl.GetBuckets()) < 24 || hl.GetCircuit() != controlv1.Endpoint_CIRCUIT_CLOSED {
			t.Errorf("health = %v", hl)
		}
		_, err = controlv1.NewEndpointHealthServiceClient(n.cc).GetEndpointHealth(beta.ctx(), &controlv1.GetEndpointHealthRequest{EndpointId: acme.ids["ep_acme"]})
		wantCode(t, "another tenant's health", err, codes.NotFound)
	})
}
