package control_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestPlanCap: one publish plans at most Config.MaxPlanned deliveries: a
// tenant with more endpoints subscribed to a type cannot make one huge
// plan and one huge append that every tenant's work waits behind.
func TestPlanCap(t *testing.T) {
	n := start(t, control.Config{MaxPlanned: 3})
	n.tenant(t, "acme")
	ctx, cancel := context.WithTimeout(as(context.Background(), adminToken), 30*time.Second)
	defer cancel()
	publish := func(id string) error {
		_, err := controlv1.NewEventServiceClient(n.cc).Publish(ctx, &controlv1.PublishRequest{TenantId: "acme", EventId: id, Type: "order.paid", Payload: []byte(`{}`)})
		return err
	}
	for i := range 3 {
		n.endpoint(t, "acme", fmt.Sprintf("ep_%d", i))
	}
	if err := publish("at-the-cap"); err != nil {
		t.Fatalf("a publish to 3 endpoints, the cap: %v", err)
	}
	n.endpoint(t, "acme", "ep_3")
	err := publish("over-the-cap")
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "3 deliveries") || !strings.Contains(err.Error(), "raise") {
		t.Fatalf("a publish to 4 endpoints: %v; want FAILED_PRECONDITION naming the cap of 3 deliveries and how to raise it", err)
	}
}
