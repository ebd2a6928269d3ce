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
	plain  bool     // seal nothing new (see Plain)
	keks   KEKStore // where the vault's KEKs are; nil: data keys sealed under the master key (see kek.go)

	mu      sync.Mutex             // guards open and kekOpen
	open    map[string]*dataKey    // tenant → its current key, opened
	kekOpen map[string]cipher.AEAD // KEK id → the KEK, opened
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
	return &Payloads{vault: vault, keys: keys, erased: erased, rand: rand.Reader, open: map[string]*dataKey{}, kekOpen: map[string]cipher.AEAD{}}
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
		return p.remember(ctx, tenantID, stored)
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
	return p.remember(ctx, tenantID, stored)
}

// create makes a new data key for the tenant and stores it, wrapped under
// the vault's current KEK, unless another node stored one first: the
// vault's is returned.
func (p *Payloads) create(ctx context.Context, tenantID string) (events.DataKey, error) {
	raw := make([]byte, chacha20poly1305.KeySize+8)
	if _, err := io.ReadFull(p.rand, raw); err != nil {
		return events.DataKey{}, fmt.Errorf("seal: read a data key: %w", err)
	}
	key, idBytes := raw[:chacha20poly1305.KeySize], raw[chacha20poly1305.KeySize:]
	id := "dk_" + hex.EncodeToString(idBytes)
	for range 3 {
		kek, err := p.vault.KEK(ctx)
		if err != nil {
			return events.DataKey{}, err
		}
		sealed, err := p.sealKey(ctx, tenantID, id, kek, key)
		if err != nil {
			return events.DataKey{}, err
		}
		stored, err := p.vault.PutDataKey(ctx, events.DataKey{TenantID: tenantID, ID: id, KEK: kek, Sealed: sealed})
		if !errors.Is(err, events.ErrKEKChanged) {
			return stored, err
		}
	}
	return events.DataKey{}, fmt.Errorf("seal: the vault's key-encryption key keeps changing; publish again")
}

// sealKey seals a data key under the KEK kek, or under the current master
// key when kek is "".
func (p *Payloads) sealKey(ctx context.Context, tenantID, id, kek string, key []byte) ([]byte, error) {
	if kek == "" {
		masterID, nonce, ct, err := p.keys.Seal(key, dataKeyAAD(tenantID, id))
		if err != nil {
			return nil, err
		}
		return proto.Marshal(&hooklinev1.SealedValue{MasterKeyId: masterID, Nonce: nonce, Ciphertext: ct})
	}
	aead, err := p.kek(ctx, kek)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(p.rand, nonce); err != nil {
		return nil, fmt.Errorf("seal: read nonce: %w", err)
	}
	// Under a KEK, no master key: the KEK is sealed under one.
	return proto.Marshal(&hooklinev1.SealedValue{Nonce: nonce, Ciphertext: aead.Seal(nil, nonce, key, dataKeyAAD(tenantID, id))})
}

// openKey opens a data key as the vault keeps it, and says which master
// key sealed it ("" when a KEK wraps it).
func (p *Payloads) openKey(ctx context.Context, k events.DataKey) ([]byte, string, error) {
	var sv hooklinev1.SealedValue
	if err := proto.Unmarshal(k.Sealed, &sv); err != nil {
		return nil, "", fmt.Errorf("seal: the data key %q of tenant %s is damaged: %w", k.ID, k.TenantID, err)
	}
	if k.KEK == "" {
		key, err := p.keys.Open(sv.GetMasterKeyId(), sv.GetNonce(), sv.GetCiphertext(), dataKeyAAD(k.TenantID, k.ID))
		return key, sv.GetMasterKeyId(), err
	}
	aead, err := p.kek(ctx, k.KEK)
	if err != nil {
		return nil, "", err
	}
	key, err := aead.Open(nil, sv.GetNonce(), sv.GetCiphertext(), dataKeyAAD(k.TenantID, k.ID))
	if err != nil {
		return nil, "", fmt.Errorf("%w: the data key %q of tenant %s under key-encryption key %s", ErrOpen, k.ID, k.TenantID, k.KEK)
	}
	return key, "", nil
}

// remember opens a stored key and keeps it as the tenant's current one. A
// key read just before a rotation may name a KEK the rotation destroyed
// since: it is read again, wrapped under the new one.
func (p *Payloads) remember(ctx context.Context, tenantID string, stored events.DataKey) (*dataKey, error) {
	key, _, err := p.openKey(ctx, stored)
	for range 3 {
		if !errors.Is(err, ErrNoKEK) {
			break
		}
		again, rerr := p.vault.DataKey(ctx, tenantID)
		if errors.Is(rerr, events.ErrNoDataKey) || rerr == nil && again.ID != stored.ID {
			return nil, ErrErased
		}
		if rerr != nil {
			return nil, rerr
		}
		if again.KEK == stored.KEK {
			return nil, fmt.Errorf("seal: the data key of tenant %s is wrapped under key-encryption key %s, which the KEK store does not hold: is --vault-kek the store every node uses? %w", tenantID, stored.KEK, err)
		}
		stored = again
		key, _, err = p.openKey(ctx, stored)
	}
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
// are), or with a KEK store every KEK, so that the other master keys can
// be retired. It returns how many it resealed.
func (p *Payloads) Reseal(ctx context.Context) (int, error) {
	if p == nil {
		return 0, nil
	}
	if p.keks != nil {
		return p.resealKEKs(ctx)
	}
	keys, err := p.vault.DataKeys(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		key, masterID, err := p.openKey(ctx, k)
		if err != nil {
			return n, fmt.Errorf("reseal the data key of tenant %s: %w", k.TenantID, err)
		}
		if masterID == p.keys.CurrentID() {
			continue
		}
		sealed, err := p.sealKey(ctx, k.TenantID, k.ID, "", key)
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
