package control_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestUnknownTokens: a made-up bearer, whether it looks like a portal
// token or an API key, costs one local lookup: it is refused without a
// read of the log or a wait for any member's projections.
func TestUnknownTokens(t *testing.T) {
	n := start(t, control.Config{})
	n.tenant(t, "acme")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	portals := controlv1.NewPortalServiceClient(n.cc)

	issued, err := portals.IssuePortalToken(as(ctx, adminToken), &controlv1.IssuePortalTokenRequest{TenantId: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := portals.GetSession(as(ctx, issued.GetPortalToken()), &controlv1.GetSessionRequest{}); err != nil {
		t.Fatalf("a portal token just issued: %v", err)
	}
	for _, prefix := range []string{"hlp_", "hk_"} {
		t.Run(prefix, func(t *testing.T) {
			before := n.log.heads.Load()
			start := time.Now()
			const calls = 20
			for i := range calls {
				_, err := portals.GetSession(as(ctx, fmt.Sprintf("%smadeup%03d", prefix, i)), &controlv1.GetSessionRequest{})
				if status.Code(err) != codes.Unauthenticated {
					t.Fatalf("made-up %s bearer: %v, want UNAUTHENTICATED", prefix, err)
				}
			}
			if heads := n.log.heads.Load() - before; heads != 0 {
				t.Errorf("%d made-up %s bearers read the log's head %d times, want 0: an unknown token costs one local lookup", calls, prefix, heads)
			}
			t.Logf("%d made-up %s bearers refused in %v", calls, prefix, time.Since(start))
		})
	}
}
