package seal

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/crypto/chacha20poly1305"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// ErrErased says that bytes were sealed under a data key that was
// destroyed: the tenant's payloads were erased, and nothing can read them.
var ErrErased = errors.New("seal: the payload was erased")

// Payloads seals tenants' payloads and stored response bodies under their
// data keys: one random 256-bit key per tenant, kept in the store's
// [events.Vault] sealed under the master key, and used with
// XChaCha20-Poly1305 (random 192-bit nonces: no bound on how many values
// one key seals). Destroying a tenant's key in the vault crypto-shreds
// everything sealed under it, wherever a copy lies.
//
// A nil *Payloads seals nothing: Seal returns the clear bytes and no
// PayloadSeal, and Open passes unsealed bytes through (a store without a
// vault, or payloads recorded before sealing existed).
type Payloads struct {
	vault  events.Vault
	keys   *Keyring
	erased func(tenantID, dataKeyID string) bool
	rand   io.Reader
	plain  bool // seal nothing new (see Plain)

	mu   sync.Mutex
	open map[string]*dataKey // tenant → its current key, opened
}

// dataKey is a tenant's data key, opened.
type dataKey struct {
	id   string
	aead cipher.AEAD
}

// NewPayloads returns the sealer of the tenants' payloads whose keys vault
// keeps, sealed under keys. erased reports whether the log recorded the
// destruction of a tenant's data key (TenantErased), so that no node opens
// with a key it still holds in memory once the erasure is recorded; nil
// means never.
func NewPayloads(vault events.Vault, keys *Keyring, erased func(tenantID, dataKeyID string) bool) *Payloads {
	if erased == nil {
		erased = func(string, string) bool { return false }
	}
	return &Payloads{vault: vault, keys: keys, erased: erased, rand: rand.Reader, open: map[string]*dataKey{}}
}

// Plain makes p seal nothing new, while it still opens what other nodes
// (or this one, before) sealed: a node run with --plain-payloads in a
// cluster of sealing nodes must still deliver their events. It returns p.
func (p *Payloads) Plain() *Payloads {
	p.plain = true
	return p
}

// PayloadAAD binds a sealed event payload to its tenant and event.
func PayloadAAD(tenantID, eventID string) []byte {
	return fmt.Appendf(nil, "tenant/%s/event/%s/payload", tenantID, eventID)
}

// ResponseAAD binds a sealed response body to its delivery (not to one
// attempt: the body is sealed before the attempt's number is final).
func ResponseAAD(tenantID, deliveryID string) []byte {
	return fmt.Appendf(nil, "tenant/%s/delivery/%s/response", tenantID, deliveryID)
}

// dataKeyAAD binds a sealed data key to its tenant and id.
func dataKeyAAD(tenantID, id string) []byte {
	return fmt.Appendf(nil, "tenant/%s/data-key/%s", tenantID, id)
}

// Seal seals clear bytes under the tenant's current data key, creating the
// key when the tenant has none, and returns the ciphertext and its seal.
func (p *Payloads) Seal(ctx context.Context, tenantID string, aad, clear []byte) ([]byte, *hooklinev1.PayloadSeal, error) {
	if p == nil || p.plain {
		return clear, nil, nil
	}
	k, err := p.current(ctx, tenantID)
	if err != nil {
		return nil, nil, err
	}
	nonce := make([]byte, k.aead.NonceSize())
	if _, err := io.ReadFull(p.rand, nonce); err != nil {
		return nil, nil, fmt.Errorf("seal: read nonce: %w", err)
	}
	return k.aead.Seal(nil, nonce, clear, aad), &hooklinev1.PayloadSeal{DataKeyId: k.id, Nonce: nonce}, nil
}

// Open opens bytes that Seal sealed under s (unsealed bytes, s nil, pass
// through). It fails with [ErrErased] when s's data key was destroyed.
func (p *Payloads) Open(ctx context.Context, tenantID string, aad, sealed []byte, s *hooklinev1.PayloadSeal) ([]byte, error) {
	if s == nil {
		return sealed, nil
	}
	if p == nil {
		return nil, fmt.Errorf("seal: bytes are sealed under data key %q, and this node keeps no vault", s.GetDataKeyId())
	}
	if p.erased(tenantID, s.GetDataKeyId()) {
		return nil, ErrErased
	}
	k, err := p.keyOf(ctx, tenantID, s.GetDataKeyId())
	if err != nil {
		return nil, err
	}
	if len(s.GetNonce()) != k.aead.NonceSize() {
		return nil, fmt.Errorf("%w: nonce is %d bytes, want %d", ErrOpen, len(s.GetNonce()), k.aead.NonceSize())
	}
	clear, err := k.aead.Open(nil, s.GetNonce(), sealed, aad)
	if err != nil {
		return nil, fmt.Errorf("%w under data key %q", ErrOpen, s.GetDataKeyId())
	}
	return clear, nil
}

// OpenEvent returns ev with its payload (and its schema violation's
// pointer and message) in clear: ev itself when it is not sealed, else a
// copy whose payload_seal still names the key. It fails with [ErrErased]
// when the payload was erased.
func (p *Payloads) OpenEvent(ctx context.Context, ev *hooklinev1.EventPublished) (*hooklinev1.EventPublished, error) {
	if ev == nil || ev.GetPayloadSeal() == nil && ev.GetSchemaViolation().GetSealed() == nil {
		return ev, nil
	}
	clear, err := p.Open(ctx, ev.GetTenantId(), PayloadAAD(ev.GetTenantId(), ev.GetEventId()), ev.GetPayload(), ev.GetPayloadSeal())
	if err != nil {
		return nil, err
	}
	v, err := p.openViolation(ctx, ev)
	if err != nil {
		return nil, err
	}
	out := shallowEvent(ev)
	out.Payload, out.SchemaViolation = clear, v
	return out, nil
}

// SealEvent returns ev with its payload sealed, and with what its schema
// violation quotes of the payload sealed under the same key: a copy, ev
// keeps its clear payload (the publish hands it to the grains).
func (p *Payloads) SealEvent(ctx context.Context, ev *hooklinev1.EventPublished) (*hooklinev1.EventPublished, error) {
	if p == nil || p.plain {
		return ev, nil
	}
	ct, s, err := p.Seal(ctx, ev.GetTenantId(), PayloadAAD(ev.GetTenantId(), ev.GetEventId()), ev.GetPayload())
	if err != nil {
		return nil, err
	}
	v, err := p.sealViolation(ctx, ev, s)
	if err != nil {
		return nil, err
	}
	out := shallowEvent(ev)
	out.Payload, out.PayloadSeal, out.SchemaViolation = ct, s, v
	return out, nil
}

// shallowEvent copies ev, which others may be reading (it is not
// changed), for a copy with another payload.
func shallowEvent(ev *hooklinev1.EventPublished) *hooklinev1.EventPublished {
	return proto.CloneOf(ev)
}

// Erased reports whether the tenant's data key id was destroyed.
func (p *Payloads) Erased(tenantID, id string) bool {
	return p != nil && id != "" && p.erased(tenantID, id)
}

// CurrentKey returns the id of the tenant's current data key, "" when it
// has none.
func (p *Payloads) CurrentKey(ctx context.Context, tenantID string) (string, error) {
	if p == nil {
		return "", nil
	}
	k, err := p.vault.DataKey(ctx, tenantID)
	if errors.Is(err, events.ErrNoDataKey) {
		return "", nil
	}
	return k.ID, err
}

// Destroy destroys the tenant's data key id in the vault and forgets it.
// Call it once its TenantErased is in the log.
func (p *Payloads) Destroy(ctx context.Context, tenantID, id string) error {
	if p == nil || id == "" {
		return nil
	}
	p.mu.Lock()
	if k := p.open[tenantID]; k != nil && k.id == id {
		delete(p.open, tenantID)
	}
	p.mu.Unlock()
	return p.vault.DestroyDataKey(ctx, tenantID, id)
}

// current returns the tenant's current data key, opened: the one in
// memory, the vault's, or a new one. A key whose erasure the log records
// but that is still in the vault (the erasing node stopped between the two)
// is destroyed here, and a new one made.
func (p *Payloads) current(ctx context.Context, tenantID string) (*dataKey, error) {
	p.mu.Lock()
	k := p.open[tenantID]
	p.mu.Unlock()
	if k != nil && !p.erased(tenantID, k.id) {
		return k, nil
	}
	for range 3 {
		stored, err := p.vault.DataKey(ctx, tenantID)
		switch {
		case errors.Is(err, events.ErrNoDataKey):
			if stored, err = p.create(ctx, tenantID); err != nil {
				return nil, err
			}
		case err != nil:
			return nil, err
		}
		if p.erased(tenantID, stored.ID) {
			if err := p.Destroy(ctx, tenantID, stored.ID); err != nil {
				return nil, err
			}
			continue
		}
		return p.remember(tenantID, stored)
	}
	return nil, fmt.Errorf("seal: the data key of tenant %s is being erased; publish again", tenantID)
}

// keyOf returns the tenant's data key id, opened, or [ErrErased] when the
// vault no longer holds it (keys are never reused, and the vault holds
// only the current one).
func (p *Payloads) keyOf(ctx context.Context, tenantID, id string) (*dataKey, error) {
	p.mu.Lock()
	k := p.open[tenantID]
	p.mu.Unlock()
	if k != nil && k.id == id {
		return k, nil
	}
	stored, err := p.vault.DataKey(ctx, tenantID)
	if errors.Is(err, events.ErrNoDataKey) {
		return nil, ErrErased
	}
	if err != nil {
		return nil, err
	}
	if stored.ID != id {
		return nil, ErrErased
	}
	return p.remember(tenantID, stored)
}

// create makes a new data key for the tenant and stores it, unless
// another node stored one first: the vault's is returned.
func (p *Payloads) create(ctx context.Context, tenantID string) (events.DataKey, error) {
	raw := make([]byte, chacha20poly1305.KeySize+8)
	if _, err := io.ReadFull(p.rand, raw); err != nil {
		return events.DataKey{}, fmt.Errorf("seal: read a data key: %w", err)
	}
	key, idBytes := raw[:chacha20poly1305.KeySize], raw[chacha20poly1305.KeySize:]
	id := "dk_" + hex.EncodeToString(idBytes)
	sealed, err := p.sealKey(tenantID, id, key)
	if err != nil {
		return events.DataKey{}, err
	}
	return p.vault.PutDataKey(ctx, events.DataKey{TenantID: tenantID, ID: id, Sealed: sealed})
}

// sealKey seals a data key under the current master key.
func (p *Payloads) sealKey(tenantID, id string, key []byte) ([]byte, error) {
	masterID, nonce, ct, err := p.keys.Seal(key, dataKeyAAD(tenantID, id))
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&hooklinev1.SealedValue{MasterKeyId: masterID, Nonce: nonce, Ciphertext: ct})
}

// openKey opens a data key as the vault keeps it.
func (p *Payloads) openKey(k events.DataKey) ([]byte, string, error) {
	var sv hooklinev1.SealedValue
	if err := proto.Unmarshal(k.Sealed, &sv); err != nil {
		return nil, "", fmt.Errorf("seal: the data key %q of tenant %s is damaged: %w", k.ID, k.TenantID, err)
	}
	key, err := p.keys.Open(sv.GetMasterKeyId(), sv.GetNonce(), sv.GetCiphertext(), dataKeyAAD(k.TenantID, k.ID))
	return key, sv.GetMasterKeyId(), err
}

// remember opens a stored key and keeps it as the tenant's current one.
func (p *Payloads) remember(tenantID string, stored events.DataKey) (*dataKey, error) {
	key, _, err := p.openKey(stored)
	if err != nil {
		return nil, err
	}
	aead, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, err
	}
	k := &dataKey{id: stored.ID, aead: aead}
	p.mu.Lock()
	p.open[tenantID] = k
	p.mu.Unlock()
	return k, nil
}

// Reseal seals every data key in the vault that is not sealed under the
// current master key anew under it (the same keys: payloads stay as they
// are), so that the other master keys can be retired. It returns how many
// it resealed.
func (p *Payloads) Reseal(ctx context.Context) (int, error) {
	if p == nil {
		return 0, nil
	}
	keys, err := p.vault.DataKeys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		key, masterID, err := p.openKey(k)
		if err != nil {
			return n, fmt.Errorf("reseal the data key of tenant %s: %w", k.TenantID, err)
		}
		if masterID == p.keys.CurrentID() {
			continue
		}
		sealed, err := p.sealKey(k.TenantID, k.ID, key)
		if err != nil {
			return n, err
		}
		if err := p.vault.ReplaceDataKey(ctx, k, events.DataKey{TenantID: k.TenantID, ID: k.ID, Sealed: sealed}); err != nil && !errors.Is(err, events.ErrDataKeyChanged) {
			return n, err
		}
		n++
	}
	return n, nil
}
