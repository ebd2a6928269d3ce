package client_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestEndpointQuota: a tenant has at most quota.max_endpoints endpoints
// (deleted ones not counted); one more is refused with an error that
// names the quota and how to raise it, and the admin raises it.
func TestEndpointQuota(t *testing.T) {
	n := clienttest.Start(t, clienttest.Options{})
	admin := n.Client(t, clienttest.AdminToken)
	ctx := ctxFor(t)
	if _, err := admin.CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{MaxEndpoints: 2}}); err != nil {
		t.Fatal(err)
	}
	key, err := admin.IssueAPIKey(ctx, &controlv1.IssueApiKeyRequest{TenantId: "acme", Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	acme := n.Client(t, key.GetApiKey())
	var ids []string
	create := func(id string) error {
		r, err := acme.CreateEndpoint(ctx, &controlv1.CreateEndpointRequest{EndpointId: id, Settings: &controlv1.EndpointSettings{Url: "http://127.0.0.1:9/in", EventTypes: []string{"*"}}})
		ids = append(ids, r.GetEndpoint().GetEndpointId())
		return err
	}
	for i := range 2 {
		if err := create(fmt.Sprintf("ep_%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	err = create("ep_2")
	if !errors.Is(err, client.ErrFailedPrecondition) || !strings.Contains(err.Error(), "quota.max_endpoints") || !strings.Contains(err.Error(), "raise") {
		t.Fatalf("a third endpoint: %v; want FAILED_PRECONDITION naming quota.max_endpoints and how to raise it", err)
	}
	if _, err := acme.DeleteEndpoint(ctx, &controlv1.DeleteEndpointRequest{EndpointId: ids[0]}); err != nil {
		t.Fatal(err)
	}
	if err := create("ep_2"); err != nil {
		t.Fatalf("a third endpoint once one of two is deleted: %v", err)
	}
	if _, err := admin.SetQuota(ctx, &controlv1.SetQuotaRequest{TenantId: "acme", Quota: &hooklinev1.Quota{MaxEndpoints: 3}}); err != nil {
		t.Fatal(err)
	}
	if err := create("ep_3"); err != nil {
		t.Fatalf("a third live endpoint once the quota is 3: %v", err)
	}
}
