package history_test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/projections/history"
)

// FuzzCursor searches with cursors a caller made up, as anyone holding the
// API may: a search never panics, and either refuses the cursor with
// ErrBadCursor or returns only deliveries the query itself may read (its
// tenant, endpoint and status), however the cursor was made.
//
// Random strings seldom get past the cursor's checksum, so the fuzzer also
// forges well-formed cursors: a cursor is base64url(version, query
// fingerprint, key, first 8 bytes of the SHA-256 of what precedes), so the
// test takes the version and fingerprint from a real cursor of the query,
// puts the fuzzer's bytes as the key and seals it with a correct checksum.
// Only the check that the key lies inside the query's own index range then
// stands between the forger and another tenant's deliveries (the seed holds
// globex's too).
func FuzzCursor(f *testing.F) {
	fx := newFixture(f)
	seed(fx)
	h, _ := fx.open(vfs.NewMem(), history.Config{})
	queries := []history.Query{
		{TenantID: "acme", Limit: 2},
		{TenantID: "acme", EndpointID: "B", Limit: 1},
		{TenantID: "acme", Status: history.Succeeded, Limit: 1},
		{TenantID: "acme", EventType: "order.shipped", Limit: 1},
	}
	// The head (version and fingerprint) of each query's real cursors,
	// and a real key to seed the corpus with.
	heads := make([][]byte, len(queries))
	for i, q := range queries {
		p, err := h.Search(q)
		if err != nil {
			f.Fatalf("Search(%+v) = %v", q, err)
		}
		if p.Next == "" {
			f.Fatalf("Search(%+v) has no second page to take a cursor from", queries[i])
		}
		raw, err := base64.RawURLEncoding.DecodeString(p.Next)
		if err != nil || len(raw) < 1+8+8 {
			f.Fatalf("a real cursor %q does not have the documented form", p.Next)
		}
		heads[i] = raw[:9]
		f.Add(uint8(i), true, raw[9:len(raw)-8])
		f.Add(uint8(i), false, []byte(p.Next))
	}
	f.Add(uint8(0), false, []byte("!!"))
	f.Add(uint8(1), true, []byte{})
	f.Add(uint8(2), true, []byte{0xff, 0xff, 0xff})

	f.Fuzz(func(t *testing.T, which uint8, forge bool, data []byte) {
		i := int(which) % len(queries)
		q := queries[i]
		q.Cursor = string(data)
		if forge {
			body := append(append([]byte{}, heads[i]...), data...)
			sum := sha256.Sum256(body)
			q.Cursor = base64.RawURLEncoding.EncodeToString(append(body, sum[:8]...))
		}
		p, err := h.Search(q)
		if err != nil {
			if !errors.Is(err, history.ErrBadCursor) {
				t.Fatalf("Search with cursor %q = %v, want a page or ErrBadCursor", q.Cursor, err)
			}
			return
		}
		if len(p.Deliveries) > q.Limit {
			t.Fatalf("page of %d deliveries, limit %d", len(p.Deliveries), q.Limit)
		}
		for _, d := range p.Deliveries {
			if d.TenantID != q.TenantID ||
				(q.EndpointID != "" && d.EndpointID != q.EndpointID) ||
				(q.Status != 0 && d.Status != q.Status) ||
				(q.EventType != "" && d.EventType != q.EventType) {
				t.Fatalf("cursor %q of query %+v found %+v", q.Cursor, queries[i], d)
			}
		}
	})
}
