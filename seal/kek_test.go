package seal_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
	"github.com/hookline/hookline/seal/kekstore"
)

// kekStore is a KEK store in a directory of the test's own.
func kekStore(t *testing.T) *kekstore.Store {
	t.Helper()
	s, err := kekstore.Open(t.Context(), "file://"+filepath.ToSlash(filepath.Join(t.TempDir(), "keks")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// restored is a vault restored from a copy of another's data keys: the
// copy a backup, the WAL or a replica holds.
func restored(t *testing.T, copied []events.DataKey) events.Vault {
	t.Helper()
	v := memVault(t)
	for _, k := range copied {
		if cur, err := v.KEK(t.Context()); err != nil || cur != k.KEK {
			if err := v.SetKEK(t.Context(), cur, k.KEK); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := v.PutDataKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	return v
}

// TestKEKRotationShredsCopiesOfTheVault: with a KEK store, a copy of the
// vault made before an erasure opens nothing after it, even with the
// master key: the erased tenant's key, and the others' as copied, are
// wrapped under a KEK the erasure destroyed. The vault itself still opens
// every tenant's payloads but the erased one's, on a node started afresh.
func TestKEKRotationShredsCopiesOfTheVault(t *testing.T) {
	ctx := t.Context()
	vault, store, kr := memVault(t), kekStore(t), parsed(t, masterA)
	marks := &erasedSet{ids: map[string]bool{}}
	p := seal.NewPayloads(vault, kr, marks.erased).UseKEKs(store)
	if err := p.StartKEKs(ctx); err != nil {
		t.Fatal(err)
	}
	sealed := map[string]*hooklinev1.EventPublished{}
	for _, tenant := range []string{"gone", "kept"} {
		ev, err := p.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: tenant, EventId: "evt_1", Payload: []byte("payload of " + tenant)})
		if err != nil {
			t.Fatal(err)
		}
		sealed[tenant] = ev
	}
	copied, err := vault.DataKeys(ctx)
	if err != nil || len(copied) != 2 || copied[0].KEK == "" {
		t.Fatalf("the vault's keys: %+v, %v; want two, wrapped under a KEK", copied, err)
	}
	for _, k := range copied {
		if bytes.Contains(k.Sealed, []byte("payload")) {
			t.Fatal("a key in clear")
		}
	}

	goneKey := sealed["gone"].GetPayloadSeal().GetDataKeyId()
	marks.add(goneKey)
	if err := p.Destroy(ctx, "gone", goneKey); err != nil {
		t.Fatal(err)
	}
	if err := p.RotateKEK(ctx); err != nil {
		t.Fatal(err)
	}

	fromCopy := seal.NewPayloads(restored(t, copied), kr, nil).UseKEKs(store)
	for tenant, ev := range sealed {
		if opened, err := fromCopy.OpenEvent(ctx, ev); err == nil {
			t.Fatalf("the copy of the vault made before the erasure opens %s's payload: %q", tenant, opened.GetPayload())
		}
	}
	fresh := seal.NewPayloads(vault, kr, marks.erased).UseKEKs(store)
	if err := fresh.StartKEKs(ctx); err != nil {
		t.Fatal(err)
	}
	if opened, err := fresh.OpenEvent(ctx, sealed["kept"]); err != nil || string(opened.GetPayload()) != "payload of kept" {
		t.Fatalf("the vault after the erasure, the other tenant: %q, %v", opened.GetPayload(), err)
	}
	if _, err := fresh.OpenEvent(ctx, sealed["gone"]); !errors.Is(err, seal.ErrErased) {
		t.Fatalf("the vault after the erasure, the erased tenant: %v, want ErrErased", err)
	}
	if ids, err := store.List(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("the KEK store after the rotation: %v, %v; want the current KEK alone", ids, err)
	}
}

// TestKEKStartWrapsKeysFromBefore: a vault whose keys were sealed under
// the master key (before KEKs) has them wrapped under its first KEK when
// a node starts with a KEK store, and they still open; a node without the
// store then refuses to start on that vault.
func TestKEKStartWrapsKeysFromBefore(t *testing.T) {
	ctx := t.Context()
	vault, kr := memVault(t), parsed(t, masterA)
	before := seal.NewPayloads(vault, kr, nil)
	ev, err := before.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: []byte("old")})
	if err != nil {
		t.Fatal(err)
	}
	p := seal.NewPayloads(vault, kr, nil).UseKEKs(kekStore(t))
	if err := p.StartKEKs(ctx); err != nil {
		t.Fatal(err)
	}
	if k, err := vault.DataKey(ctx, "acme"); err != nil || k.KEK == "" {
		t.Fatalf("the key after the start: %+v, %v; want it wrapped under a KEK", k, err)
	}
	if opened, err := p.OpenEvent(ctx, ev); err != nil || string(opened.GetPayload()) != "old" {
		t.Fatalf("a payload sealed before KEKs: %q, %v", opened.GetPayload(), err)
	}
	if err := seal.NewPayloads(vault, kr, nil).StartKEKs(ctx); err == nil || !bytes.Contains([]byte(err.Error()), []byte("--vault-kek")) {
		t.Fatalf("a node without the KEK store: %v; want it refused, naming --vault-kek", err)
	}
}

// TestKEKRotationsAtOnce: erasures on several nodes rotate the KEK at
// once; every surviving key still opens afterwards, and one KEK is left.
func TestKEKRotationsAtOnce(t *testing.T) {
	ctx := context.Background()
	vault, store, kr := memVault(t), kekStore(t), parsed(t, masterA)
	first := seal.NewPayloads(vault, kr, nil).UseKEKs(store)
	if err := first.StartKEKs(ctx); err != nil {
		t.Fatal(err)
	}
	var evs []*hooklinev1.EventPublished
	for _, tenant := range []string{"a", "b", "c", "d"} {
		ev, err := first.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: tenant, EventId: "evt_1", Payload: []byte(tenant)})
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	errs := make(chan error, 4)
	for range 4 {
		go func() { errs <- seal.NewPayloads(vault, kr, nil).UseKEKs(store).RotateKEK(ctx) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	fresh := seal.NewPayloads(vault, kr, nil).UseKEKs(store)
	for _, ev := range evs {
		if opened, err := fresh.OpenEvent(ctx, ev); err != nil || string(opened.GetPayload()) != ev.GetTenantId() {
			t.Fatalf("%s's payload after rotations at once: %q, %v", ev.GetTenantId(), opened.GetPayload(), err)
		}
	}
	if err := fresh.SettleKEKs(ctx); err != nil {
		t.Fatal(err)
	}
	if ids, err := store.List(ctx); err != nil || len(ids) != 1 {
		t.Fatalf("the KEK store after rotations at once: %v, %v; want one KEK", ids, err)
	}
}

// BenchmarkRotateKEK is an erasure's replacement of the KEK on a vault of
// 1,000 tenants on disk (the embedded store's vault: one synced file per
// key) with the KEKs in a directory.
func BenchmarkRotateKEK(b *testing.B) {
	ctx := context.Background()
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(b.TempDir(), "log")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	s, err := kekstore.Open(ctx, "file://"+filepath.ToSlash(filepath.Join(b.TempDir(), "keks")))
	if err != nil {
		b.Fatal(err)
	}
	p := seal.NewPayloads(l, parsed(b, masterA), nil).UseKEKs(s)
	if err := p.StartKEKs(ctx); err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if _, err := p.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: fmt.Sprint("t", i), EventId: "e", Payload: []byte("x")}); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		if err := p.RotateKEK(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
