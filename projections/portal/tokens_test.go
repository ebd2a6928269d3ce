package portal_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/portal"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

var (
	t0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	quiet = slog.New(slog.DiscardHandler)
)

// fixture is a log and the portal projection that follows it.
type fixture struct {
	t    *testing.T
	log  *embedded.Log
	runs *projections.Runner
	toks *portal.Tokens
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	fs := vfs.NewMem()
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	r, err := projections.Open(l, projections.Config{Dir: "proj", FS: fs, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	toks, err := portal.New(r)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		r.Close()
		l.Close()
	})
	return &fixture{t: t, log: l, runs: r, toks: toks}
}

// issue records a token of tenant issued at `at` for ttl, as the control
// API does, and waits until the projection has it.
func (f *fixture) issue(tenant, id string, at time.Time, ttl time.Duration) {
	f.t.Helper()
	f.append(id, &hooklinev1.PortalTokenIssued{
		TenantId: tenant, TokenId: id, TokenSha256: portal.Hash("hlp_" + id), Capabilities: []string{portal.Read},
		At: timestamppb.New(at), ExpiresAt: timestamppb.New(at.Add(ttl)),
	})
}

func (f *fixture) append(id string, ev *hooklinev1.PortalTokenIssued) {
	f.t.Helper()
	e, err := events.Encode(ev, id, portal.Stream(id))
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := f.log.Append(ctx, portal.Stream(id), events.NoStream{}, e)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.runs.WaitFor(ctx, res.Position); err != nil {
		f.t.Fatal(err)
	}
}

// known reports whether the projection still holds token id, by id and
// by hash.
func (f *fixture) known(id string) bool {
	f.t.Helper()
	_, byID, err := f.toks.Get(id)
	if err != nil {
		f.t.Fatal(err)
	}
	_, byHash, err := f.toks.ByHash(portal.Hash("hlp_" + id))
	if err != nil {
		f.t.Fatal(err)
	}
	return byID || byHash
}

// TestExpiredTokensAreForgotten: the projection keeps the tokens that may
// still open a portal, not every token ever issued; the pattern of one
// token per customer session issues them without end.
func TestExpiredTokensAreForgotten(t *testing.T) {
	f := newFixture(t)
	const sessions = 50
	for i := range sessions {
		// One short session every ten minutes, for a day and more.
		f.issue("acme", ptk(i), t0.Add(time.Duration(i)*10*time.Minute), time.Hour)
	}
	// At the last issue, the sessions of the last hour are live.
	last := t0.Add((sessions - 1) * 10 * time.Minute)
	for i := range sessions {
		expired := !t0.Add(time.Duration(i)*10*time.Minute + time.Hour).After(last)
		if got := f.known(ptk(i)); got == expired {
			t.Errorf("token %d (expired %v): known %v", i, expired, got)
		}
	}
}

func ptk(i int) string { return "ptk_" + string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// TestList: a tenant's tokens, newest first, a page at a time.
func TestList(t *testing.T) {
	f := newFixture(t)
	for i := range 7 {
		f.issue("acme", ptk(i), t0.Add(time.Duration(i)*time.Minute), time.Hour)
	}
	f.issue("globex", ptk(20), t0.Add(3*time.Minute), time.Hour)
	revoked := &hooklinev1.PortalTokenRevoked{TenantId: "acme", TokenId: ptk(5), At: timestamppb.New(t0.Add(8 * time.Minute))}
	e, err := events.Encode(revoked, "revoke", portal.Stream(ptk(5)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := f.log.Append(ctx, portal.Stream(ptk(5)), events.Exact(0), e)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.runs.WaitFor(ctx, res.Position); err != nil {
		t.Fatal(err)
	}

	pages := func(keep func(portal.Token) bool, limit int) [][]string {
		t.Helper()
		var out [][]string
		cursor := ""
		for {
			toks, next, err := f.toks.List("acme", cursor, limit, keep)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tok := range toks {
				ids = append(ids, tok.ID)
			}
			out = append(out, ids)
			if next == "" {
				return out
			}
			cursor = next
		}
	}
	all := [][]string{{ptk(6), ptk(5), ptk(4)}, {ptk(3), ptk(2), ptk(1)}, {ptk(0)}}
	if got := pages(nil, 3); !cmp.Equal(got, all) {
		t.Errorf("pages of 3: %v, want %v", got, all)
	}
	active := func(tok portal.Token) bool { return tok.Active(t0.Add(10 * time.Minute)) }
	want := [][]string{{ptk(6), ptk(4), ptk(3), ptk(2)}, {ptk(1), ptk(0)}}
	if got := pages(active, 4); !cmp.Equal(got, want) {
		t.Errorf("active ones, pages of 4: %v, want %v (the revoked one left out)", got, want)
	}
	if _, _, err := f.toks.List("acme", "!!", 3, nil); !errors.Is(err, portal.ErrBadCursor) {
		t.Errorf("a cursor of nothing: %v, want ErrBadCursor", err)
	}
}
