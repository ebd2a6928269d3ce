package control_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// TestListPortalTokens: a tenant's portal tokens, newest first, a page at
// a time; revoked ones only on request.
func TestListPortalTokens(t *testing.T) {
	n := start(t, control.Config{})
	n.tenant(t, "acme")
	ctx, cancel := context.WithTimeout(as(context.Background(), adminToken), 30*time.Second)
	defer cancel()
	portals := controlv1.NewPortalServiceClient(n.cc)
	var ids []string
	for range 5 {
		r, err := portals.IssuePortalToken(ctx, &controlv1.IssuePortalTokenRequest{TenantId: "acme"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetToken().GetTokenId())
	}
	if _, err := portals.RevokePortalToken(ctx, &controlv1.RevokePortalTokenRequest{TenantId: "acme", TokenId: ids[1]}); err != nil {
		t.Fatal(err)
	}
	list := func(inactive bool) []string {
		t.Helper()
		var got []string
		cursor := ""
		for {
			r, err := portals.ListPortalTokens(ctx, &controlv1.ListPortalTokensRequest{TenantId: "acme", PageSize: 2, Cursor: cursor, IncludeInactive: inactive})
			if err != nil {
				t.Fatal(err)
			}
			if len(r.GetTokens()) > 2 {
				t.Fatalf("a page of %d tokens, want at most 2", len(r.GetTokens()))
			}
			for _, tok := range r.GetTokens() {
				got = append(got, tok.GetTokenId())
			}
			if cursor = r.GetNextCursor(); cursor == "" {
				return got
			}
		}
	}
	// Issued in the same instant, tokens are ordered newest first, then
	// by id: compare as sets.
	if got := list(true); len(got) != 5 || !sameSet(got, ids) {
		t.Errorf("every token: %v, want %v", got, ids)
	}
	active := []string{ids[0], ids[2], ids[3], ids[4]}
	if got := list(false); !sameSet(got, active) {
		t.Errorf("active tokens: %v, want %v", got, active)
	}
	_, err := portals.ListPortalTokens(ctx, &controlv1.ListPortalTokensRequest{TenantId: "acme", Cursor: "!"})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("a cursor of nothing: %v, want INVALID_ARGUMENT", err)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x]--; seen[x] < 0 {
			return false
		}
	}
	return true
}
