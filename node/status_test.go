//go:build !race

// Two nodes in one process (see server_test.go): .ci/run runs this file
// without -race.

package node_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestConsoleViewsOnTwoNodes checks the console's cluster-wide API on two
// nodes of one log: the cluster status lists both members with their own
// figures, whichever node answers; a portal token issued through one node
// opens the portal on the other at once; a revocation through one is
// refused on the other.
func TestConsoleViewsOnTwoNodes(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir)
	a := startServer(t, l, filepath.Join(dir, "a"))
	b := startServer(t, l, filepath.Join(dir, "b"), a.srv.Node().GossipAddress())
	poll(t, 10*time.Second, "both nodes see two members", func() bool {
		return len(a.srv.Node().Members()) == 2 && len(b.srv.Node().Members()) == 2
	})
	// b warms up the partitions it joins for, then a hands them over.
	poll(t, 10*time.Second, "both nodes serve their share", func() bool {
		sa, sb := a.srv.Serving(), b.srv.Serving()
		return sa.Len() > 0 && sb.Len() > 0 && sa.Union(sb).Len() == events.Partitions && sa.Intersect(sb).IsEmpty()
	})
	ctx, cancel := bearer(admin)
	defer cancel()

	t.Run("cluster status from either node", func(t *testing.T) {
		for _, ts := range []*testServer{a, b} {
			var st *controlv1.ClusterStatus
			var err error
			poll(t, 20*time.Second, "every partition served", func() bool {
				st, err = controlv1.NewOperatorServiceClient(ts.cc).GetClusterStatus(ctx, &controlv1.GetClusterStatusRequest{})
				return err == nil && st.GetUnserved() == 0
			})
			if len(st.GetNodes()) != 2 {
				t.Fatalf("through %s: %d nodes, want 2", ts.srv.HTTPAddr(), len(st.GetNodes()))
			}
			var live, answered int32
			for _, nd := range st.GetNodes() {
				if nd.GetError() != "" {
					t.Errorf("node %s: %s", nd.GetAddress(), nd.GetError())
				}
				live += nd.GetPartitionsLive()
				if nd.GetAnswered() {
					answered++
				}
				if nd.GetPartitionsLive() == 0 || nd.GetSlots() == 0 {
					t.Errorf("node %s has no figures of its own: %v", nd.GetAddress(), nd)
				}
			}
			if live != 256 || answered != 1 {
				t.Errorf("through %s: %d partitions live in all, %d nodes marked as answering; want 256 and 1", ts.srv.HTTPAddr(), live, answered)
			}
		}
	})

	t.Run("a portal token issued on one node works on the other", func(t *testing.T) {
		if _, err := controlv1.NewTenantServiceClient(a.cc).CreateTenant(ctx, &controlv1.CreateTenantRequest{TenantId: "acme", Name: "Acme"}); err != nil {
			t.Fatal(err)
		}
		poll(t, 10*time.Second, "b knows acme", func() bool {
			_, err := controlv1.NewPortalServiceClient(b.cc).IssuePortalToken(ctx, &controlv1.IssuePortalTokenRequest{TenantId: "acme"})
			return err == nil
		})
		for range 5 {
			tok, err := controlv1.NewPortalServiceClient(a.cc).IssuePortalToken(ctx, &controlv1.IssuePortalTokenRequest{TenantId: "acme"})
			if err != nil {
				t.Fatal(err)
			}
			pctx, pcancel := bearer(tok.GetPortalToken())
			// At once: b waits for its projections when it does not know
			// the token yet.
			if s, err := controlv1.NewPortalServiceClient(b.cc).GetSession(pctx, &controlv1.GetSessionRequest{}); err != nil || s.GetTenantId() != "acme" {
				t.Errorf("session on b right after issue on a: %v, %v", s, err)
			}
			if _, err := controlv1.NewPortalServiceClient(b.cc).RevokePortalToken(ctx, &controlv1.RevokePortalTokenRequest{TenantId: "acme", TokenId: tok.GetToken().GetTokenId()}); err != nil {
				t.Fatal(err)
			}
			poll(t, 5*time.Second, "a refuses the token revoked on b", func() bool {
				_, err := controlv1.NewPortalServiceClient(a.cc).GetSession(pctx, &controlv1.GetSessionRequest{})
				return err != nil
			})
			pcancel()
		}
	})
}
