package seal_test

import (
	"bytes"
	"errors"
	"sync"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// memVault is an embedded log in memory, for its vault.
func memVault(t testing.TB) events.Vault {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "db", FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func parsed(t testing.TB, spec string) *seal.Keyring {
	t.Helper()
	kr, err := seal.ParseKeys(spec)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

const (
	masterA = "a:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
	masterB = "b:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB="
)

// erasedSet stands in for the registry: the keys whose TenantErased the
// log holds.
type erasedSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (e *erasedSet) erased(_, id string) bool { e.mu.Lock(); defer e.mu.Unlock(); return e.ids[id] }
func (e *erasedSet) add(id string)            { e.mu.Lock(); defer e.mu.Unlock(); e.ids[id] = true }

// TestPayloadsSealOpen: a payload sealed by one node opens on another
// sharing the vault, only at its own place (event id), and not once its
// key is destroyed; a new key follows, and other tenants are untouched.
func TestPayloadsSealOpen(t *testing.T) {
	vault := memVault(t)
	kr := parsed(t, masterA)
	marks := &erasedSet{ids: map[string]bool{}}
	one, two := seal.NewPayloads(vault, kr, marks.erased), seal.NewPayloads(vault, kr, marks.erased)
	ctx := t.Context()
	clear := []byte(`{"email":"someone@example.com"}`)
	ev := &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: clear}
	sealed, err := one.SealEvent(ctx, ev)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed.GetPayload(), []byte("someone")) || sealed.GetPayloadSeal().GetDataKeyId() == "" || !bytes.Equal(ev.GetPayload(), clear) {
		t.Fatalf("sealed %q under %v; the original now %q", sealed.GetPayload(), sealed.GetPayloadSeal(), ev.GetPayload())
	}
	opened, err := two.OpenEvent(ctx, sealed)
	if err != nil || !bytes.Equal(opened.GetPayload(), clear) {
		t.Fatalf("open on another node: %q, %v", opened.GetPayload(), err)
	}
	moved := &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_2", Payload: sealed.GetPayload(), PayloadSeal: sealed.GetPayloadSeal()}
	if _, err := two.OpenEvent(ctx, moved); !errors.Is(err, seal.ErrOpen) {
		t.Fatalf("a payload copied to another event opened: %v", err)
	}
	other, err := one.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: "other", EventId: "evt_1", Payload: clear})
	if err != nil || other.GetPayloadSeal().GetDataKeyId() == sealed.GetPayloadSeal().GetDataKeyId() {
		t.Fatalf("another tenant's key: %v, %v", other.GetPayloadSeal(), err)
	}

	id := sealed.GetPayloadSeal().GetDataKeyId()
	marks.add(id) // the erasure is in the log; both nodes hold the key in memory
	if _, err := two.OpenEvent(ctx, sealed); !errors.Is(err, seal.ErrErased) {
		t.Fatalf("open once the erasure is recorded: %v, want ErrErased", err)
	}
	if err := one.Destroy(ctx, "acme", id); err != nil {
		t.Fatal(err)
	}
	fresh := seal.NewPayloads(vault, kr, nil) // a node that never saw the erasure
	if _, err := fresh.OpenEvent(ctx, sealed); !errors.Is(err, seal.ErrErased) {
		t.Fatalf("open after the key is destroyed: %v, want ErrErased", err)
	}
	again, err := two.SealEvent(ctx, &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_3", Payload: clear})
	if err != nil || again.GetPayloadSeal().GetDataKeyId() == id {
		t.Fatalf("sealing after the erasure: %v, %v; want a new key", again.GetPayloadSeal(), err)
	}
	if got, err := fresh.OpenEvent(ctx, other); err != nil || !bytes.Equal(got.GetPayload(), clear) {
		t.Fatalf("the other tenant after the erasure: %q, %v", got.GetPayload(), err)
	}
}

// TestPayloadsEraseFinishesACrashedErase: a key whose erasure the log
// records but that is still in the vault (the erasing node stopped
// between the two) is destroyed by the next seal, which uses a new key.
func TestPayloadsEraseFinishesACrashedErase(t *testing.T) {
	vault := memVault(t)
	marks := &erasedSet{ids: map[string]bool{}}
	p := seal.NewPayloads(vault, parsed(t, masterA), marks.erased)
	_, s, err := p.Seal(t.Context(), "acme", []byte("aad"), []byte("x"))
	if err != nil {
		t.Fatal(err)
	}
	marks.add(s.GetDataKeyId())
	_, s2, err := p.Seal(t.Context(), "acme", []byte("aad"), []byte("y"))
	if err != nil || s2.GetDataKeyId() == s.GetDataKeyId() {
		t.Fatalf("seal after a recorded erasure: %v, %v", s2, err)
	}
	if k, err := vault.DataKey(t.Context(), "acme"); err != nil || k.ID != s2.GetDataKeyId() {
		t.Fatalf("the vault holds %+v, %v; want only the new key", k, err)
	}
}

// TestPayloadsReseal: data keys sealed under the old master key are
// sealed anew under the current one; then a node holding only the new
// master key opens the payloads.
func TestPayloadsReseal(t *testing.T) {
	vault := memVault(t)
	old := seal.NewPayloads(vault, parsed(t, masterA), nil)
	ct, s, err := old.Seal(t.Context(), "acme", []byte("aad"), []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	both := seal.NewPayloads(vault, parsed(t, masterB+","+masterA), nil)
	if n, err := both.Reseal(t.Context()); err != nil || n != 1 {
		t.Fatalf("reseal: %d, %v", n, err)
	}
	if n, err := both.Reseal(t.Context()); err != nil || n != 0 {
		t.Fatalf("a second reseal: %d, %v; want nothing to do", n, err)
	}
	onlyNew := seal.NewPayloads(vault, parsed(t, masterB), nil)
	if got, err := onlyNew.Open(t.Context(), "acme", []byte("aad"), ct, s); err != nil || string(got) != "payload" {
		t.Fatalf("open under the new master key alone: %q, %v", got, err)
	}
}

// TestPayloadsNil: without a vault, payloads stay in clear.
func TestPayloadsNil(t *testing.T) {
	var p *seal.Payloads
	ev := &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: []byte("x")}
	if got, err := p.SealEvent(t.Context(), ev); err != nil || got != ev {
		t.Fatalf("nil SealEvent: %v, %v", got, err)
	}
	if got, err := p.OpenEvent(t.Context(), ev); err != nil || got != ev {
		t.Fatalf("nil OpenEvent: %v, %v", got, err)
	}
}

// BenchmarkPayloadSealOpen seals and opens a 1.5 KB payload under a data
// key held in memory: the cost sealing adds per publish and per read.
func BenchmarkPayloadSealOpen(b *testing.B) {
	p := seal.NewPayloads(memVault(b), parsed(b, masterA), nil)
	payload := bytes.Repeat([]byte("x"), 1536)
	ev := &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: payload}
	b.SetBytes(int64(len(payload)))
	for b.Loop() {
		sealed, err := p.SealEvent(b.Context(), ev)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.OpenEvent(b.Context(), sealed); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPayloadsPlain: a plain node seals nothing new and still opens what
// a sealing node sealed.
func TestPayloadsPlain(t *testing.T) {
	vault := memVault(t)
	kr := parsed(t, masterA)
	sealing, plain := seal.NewPayloads(vault, kr, nil), seal.NewPayloads(vault, kr, nil).Plain()
	ev := &hooklinev1.EventPublished{TenantId: "acme", EventId: "evt_1", Payload: []byte("clear")}
	if got, err := plain.SealEvent(t.Context(), ev); err != nil || got.GetPayloadSeal() != nil || string(got.GetPayload()) != "clear" {
		t.Fatalf("a plain node sealed: %v, %v", got, err)
	}
	sealed, err := sealing.SealEvent(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := plain.OpenEvent(t.Context(), sealed); err != nil || string(got.GetPayload()) != "clear" {
		t.Fatalf("a plain node opening a sealed payload: %q, %v", got.GetPayload(), err)
	}
}
