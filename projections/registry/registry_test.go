package registry_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/projections/registry"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

type fixture struct {
	t    testing.TB
	log  *embedded.Log
	head events.Position
	n    int
}

func newFixture(t testing.TB) *fixture {
	l, err := embedded.Open(embedded.Config{Dir: "log", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &fixture{t: t, log: l}
}

var quiet = slog.New(slog.DiscardHandler)

// emit appends msgs to stream (any revision: tests are the only writer).
func (f *fixture) emit(stream string, msgs ...proto.Message) {
	f.t.Helper()
	var evs []events.Event
	for _, m := range msgs {
		f.n++
		ev, err := events.Encode(m, fmt.Sprintf("test %d", f.n), stream)
		if err != nil {
			f.t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	res, err := f.log.Append(context.Background(), stream, events.Any{}, evs...)
	if err != nil {
		f.t.Fatal(err)
	}
	f.head = res.Position
}

// open runs a registry on a projection store in fs until the test ends,
// caught up with the log.
func (f *fixture) open(fs vfs.FS) (*registry.Registry, *projections.Runner) {
	f.t.Helper()
	r, err := projections.Open(f.log, projections.Config{Dir: "proj", FS: fs, Logger: quiet})
	if err != nil {
		f.t.Fatal(err)
	}
	reg, err := registry.New(r)
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	f.t.Cleanup(func() {
		cancel()
		<-done
		r.Close()
	})
	f.sync(r)
	return reg, r
}

func (f *fixture) sync(r *projections.Runner) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.WaitFor(ctx, f.head); err != nil {
		f.t.Fatal(err)
	}
}

func endpoint(tenant, id string, version int64, types ...string) *hooklinev1.EndpointCreated {
	return &hooklinev1.EndpointCreated{
		TenantId: tenant, EndpointId: id, ConfigVersion: version,
		Config: &hooklinev1.EndpointConfig{Url: "https://example.com/" + id, EventTypes: types},
		Secret: &hooklinev1.SealedSecret{Version: 1},
	}
}

func TestRegistry(t *testing.T) {
	f := newFixture(t)
	hash := sha256.Sum256([]byte("whk_secret"))
	other := sha256.Sum256([]byte("whk_other"))
	f.emit(events.TenantStream("acme"),
		&hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{AttemptsPerSecond: 50, Weight: 2}},
		&hooklinev1.ApiKeyIssued{TenantId: "acme", KeyId: "k1", KeySha256: hash[:]},
		&hooklinev1.ApiKeyIssued{TenantId: "acme", KeyId: "k2", KeySha256: other[:]},
		&hooklinev1.ApiKeyRevoked{TenantId: "acme", KeyId: "k2"},
		&hooklinev1.TenantQuotaChanged{TenantId: "acme", Quota: &hooklinev1.Quota{AttemptsPerSecond: 80, Weight: 2}},
	)
	f.emit(events.EndpointStream("ep1"), endpoint("acme", "ep1", 1, "invoice.paid", "order.shipped"))
	f.emit(events.EndpointStream("ep2"), endpoint("acme", "ep2", 1, "invoice.paid"),
		&hooklinev1.EndpointUpdated{TenantId: "acme", EndpointId: "ep2", ConfigVersion: 2,
			Config: &hooklinev1.EndpointConfig{Url: "https://example.com/ep2", EventTypes: []string{"order.shipped"}}},
		&hooklinev1.EndpointPaused{TenantId: "acme", EndpointId: "ep2", Reason: hooklinev1.EndpointPaused_REASON_GONE},
	)
	f.emit(events.EndpointStream("ep3"), endpoint("acme", "ep3", 1, "*"))
	f.emit(events.EndpointStream("ep4"), endpoint("acme", "ep4", 1, "invoice.paid"),
		&hooklinev1.EndpointDisabled{TenantId: "acme", EndpointId: "ep4", Reason: "failing for 5 days"})
	f.emit(events.EndpointStream("ep5"), endpoint("acme", "ep5", 1, "invoice.paid"),
		&hooklinev1.EndpointDeleted{TenantId: "acme", EndpointId: "ep5"})
	f.emit(events.EndpointStream("ep6"), endpoint("globex", "ep6", 1, "invoice.paid"),
		&hooklinev1.SecretRotated{TenantId: "globex", EndpointId: "ep6", Secret: &hooklinev1.SealedSecret{Version: 2}, PreviousVersion: 1},
		&hooklinev1.SecretRetired{TenantId: "globex", EndpointId: "ep6", Version: 1})

	reg, _ := f.open(vfs.NewMem())
	check(t, reg)

	t.Run("rebuilt from the log gives the same answers", func(t *testing.T) {
		reg, _ := f.open(vfs.NewMem())
		check(t, reg)
	})

	t.Run("resume and delete", func(t *testing.T) {
		reg, r := f.open(vfs.NewMem())
		f.emit(events.EndpointStream("ep2"), &hooklinev1.EndpointResumed{TenantId: "acme", EndpointId: "ep2"})
		f.emit(events.EndpointStream("ep1"), &hooklinev1.EndpointDeleted{TenantId: "acme", EndpointId: "ep1"})
		f.emit(events.EndpointStream("ep4"), &hooklinev1.EndpointResumed{TenantId: "acme", EndpointId: "ep4"})
		f.sync(r)
		refs, err := reg.EndpointsForType("acme", "order.shipped")
		if err != nil {
			t.Fatal(err)
		}
		want := []registry.EndpointRef{{ID: "ep2", ConfigVersion: 2}, {ID: "ep3", ConfigVersion: 1}}
		if diff := cmp.Diff(want, refs); diff != "" {
			t.Errorf("EndpointsForType(order.shipped) (-want +got):\n%s", diff)
		}
		refs, err = reg.EndpointsForType("acme", "invoice.paid")
		if err != nil {
			t.Fatal(err)
		}
		want = []registry.EndpointRef{{ID: "ep3", ConfigVersion: 1}, {ID: "ep4", ConfigVersion: 1}}
		if diff := cmp.Diff(want, refs); diff != "" {
			t.Errorf("EndpointsForType(invoice.paid) (-want +got):\n%s", diff)
		}
	})
}

func check(t *testing.T, reg *registry.Registry) {
	t.Helper()
	hash := sha256.Sum256([]byte("whk_secret"))
	other := sha256.Sum256([]byte("whk_other"))
	tenant, key, ok, err := reg.TenantByKeyHash(hash[:])
	if err != nil || !ok || tenant != "acme" || key != "k1" {
		t.Errorf("TenantByKeyHash(live) = %q, %q, %v, %v; want acme, k1", tenant, key, ok, err)
	}
	if _, _, ok, err := reg.TenantByKeyHash(other[:]); err != nil || ok {
		t.Errorf("TenantByKeyHash(revoked) = %v, %v; want not found", ok, err)
	}

	ten, ok, err := reg.Tenant("acme")
	if err != nil || !ok {
		t.Fatalf("Tenant(acme) = %v, %v", ok, err)
	}
	if diff := cmp.Diff(registry.Tenant{ID: "acme", Name: "Acme", Quota: registry.Quota{AttemptsPerSecond: 80, Weight: 2}}, ten); diff != "" {
		t.Errorf("Tenant (-want +got):\n%s", diff)
	}
	if _, ok, err := reg.Tenant("nobody"); err != nil || ok {
		t.Errorf("Tenant(nobody) = %v, %v", ok, err)
	}

	refs, err := reg.EndpointsForType("acme", "invoice.paid")
	if err != nil {
		t.Fatal(err)
	}
	// ep1 by type, ep3 by "*"; ep2 moved to order.shipped, ep4 disabled,
	// ep5 deleted, ep6 another tenant's.
	want := []registry.EndpointRef{{ID: "ep1", ConfigVersion: 1}, {ID: "ep3", ConfigVersion: 1}}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("EndpointsForType(invoice.paid) (-want +got):\n%s", diff)
	}
	refs, err = reg.EndpointsForType("acme", "order.shipped")
	if err != nil {
		t.Fatal(err)
	}
	want = []registry.EndpointRef{{ID: "ep1", ConfigVersion: 1}, {ID: "ep2", ConfigVersion: 2, Paused: true}, {ID: "ep3", ConfigVersion: 1}}
	if diff := cmp.Diff(want, refs); diff != "" {
		t.Errorf("EndpointsForType(order.shipped) (-want +got):\n%s", diff)
	}

	ep, ok, err := reg.Endpoint("ep6")
	if err != nil || !ok {
		t.Fatalf("Endpoint(ep6) = %v, %v", ok, err)
	}
	if ep.TenantID != "globex" || ep.Config.GetUrl() != "https://example.com/ep6" || !cmp.Equal(ep.SecretVersions, []int32{2}) {
		t.Errorf("Endpoint(ep6) = %+v", ep)
	}
	ep, ok, err = reg.Endpoint("ep5")
	if err != nil || !ok || !ep.Deleted {
		t.Errorf("Endpoint(ep5) = %+v, %v, %v; want deleted", ep, ok, err)
	}

	// Pages of two, in id order, deleted ep5 left out.
	var ids []string
	cursor := ""
	for range 5 {
		eps, next, err := reg.ListEndpoints("acme", cursor, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range eps {
			ids = append(ids, e.ID)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff([]string{"ep1", "ep2", "ep3", "ep4"}, ids); diff != "" {
		t.Errorf("ListEndpoints (-want +got):\n%s", diff)
	}
	if _, _, err := reg.ListEndpoints("acme", "not base64!", 2); !errors.Is(err, registry.ErrBadCursor) {
		t.Errorf("ListEndpoints(bad cursor) = %v, want ErrBadCursor", err)
	}
}

// TestAnswersFollowChanges: answers kept in memory are never served after
// the registry changed: each query, asked before and after a change, sees
// the change once the runner has applied it.
func TestAnswersFollowChanges(t *testing.T) {
	f := newFixture(t)
	f.emit(events.TenantStream("acme"), &hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{Weight: 1}})
	f.emit(events.EndpointStream("e1"), &hooklinev1.EndpointCreated{TenantId: "acme", EndpointId: "e1", ConfigVersion: 1,
		Config: &hooklinev1.EndpointConfig{Url: "https://e1.example/", EventTypes: []string{"invoice.paid"}}})
	reg, r := f.open(vfs.NewMem())
	for range 2 { // the second time from memory
		if tn, ok, err := reg.Tenant("acme"); err != nil || !ok || tn.Quota.Weight != 1 {
			t.Fatalf("Tenant = %+v, %v, %v", tn, ok, err)
		}
		if refs, err := reg.EndpointsForType("acme", "invoice.paid"); err != nil || len(refs) != 1 {
			t.Fatalf("EndpointsForType = %v, %v", refs, err)
		}
	}
	f.emit(events.TenantStream("acme"), &hooklinev1.TenantQuotaChanged{TenantId: "acme", Quota: &hooklinev1.Quota{Weight: 7}})
	f.emit(events.EndpointStream("e1"), &hooklinev1.EndpointDeleted{TenantId: "acme", EndpointId: "e1"})
	f.sync(r)
	if tn, _, _ := reg.Tenant("acme"); tn.Quota.Weight != 7 {
		t.Errorf("Tenant after a quota change: weight %d, want 7", tn.Quota.Weight)
	}
	if refs, _ := reg.EndpointsForType("acme", "invoice.paid"); len(refs) != 0 {
		t.Errorf("EndpointsForType after the endpoint was deleted: %v", refs)
	}
}

// TestPatterns: an endpoint subscribed with a prefix pattern is planned
// for every type under the prefix, at any depth, and for no other; one
// that several of its entries match is listed once; a pattern changed by
// an update follows; "*" gets no operational type, hookline.* gets them.
func TestPatterns(t *testing.T) {
	f := newFixture(t)
	f.emit(events.TenantStream("acme"), &hooklinev1.TenantCreated{TenantId: "acme", Name: "Acme", Quota: &hooklinev1.Quota{}})
	f.emit(events.EndpointStream("orders"), endpoint("acme", "orders", 1, "order.*"))
	f.emit(events.EndpointStream("items"), endpoint("acme", "items", 1, "order.item.*", "order.*", "order.item.added"))
	f.emit(events.EndpointStream("all"), endpoint("acme", "all", 1, "*"))
	f.emit(events.EndpointStream("ops"), endpoint("acme", "ops", 1, "hookline.*"))
	f.emit(events.EndpointStream("moved"), endpoint("acme", "moved", 1, "order.*"),
		&hooklinev1.EndpointUpdated{TenantId: "acme", EndpointId: "moved", ConfigVersion: 2,
			Config: &hooklinev1.EndpointConfig{Url: "https://example.com/moved", EventTypes: []string{"invoice.*"}}})
	f.emit(events.EndpointStream("other"), endpoint("globex", "other", 1, "order.*"))
	reg, _ := f.open(vfs.NewMem())

	ids := func(typ string) []string {
		t.Helper()
		refs, err := reg.EndpointsForType("acme", typ)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range refs {
			out = append(out, r.ID)
		}
		return out
	}
	for _, tt := range []struct {
		typ  string
		want []string
	}{
		{"order.paid", []string{"all", "items", "orders"}},
		{"order.item.added", []string{"all", "items", "orders"}},
		{"order", []string{"all"}},
		{"orders.paid", []string{"all"}},
		{"invoice.paid", []string{"all", "moved"}},
		{"hookline.endpoint.paused", []string{"ops"}},
	} {
		if diff := cmp.Diff(tt.want, ids(tt.typ)); diff != "" {
			t.Errorf("EndpointsForType(%s) (-want +got):\n%s", tt.typ, diff)
		}
	}
	// EndpointsNaming, for operational events, reads the entry as it is.
	refs, err := reg.EndpointsNaming("acme", "hookline.*")
	if err != nil || len(refs) != 1 || refs[0].ID != "ops" {
		t.Errorf("EndpointsNaming(hookline.*) = %v, %v; want ops", refs, err)
	}
}
