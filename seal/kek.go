package seal

import (
	"context"
	"crypto/cipher"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/crypto/chacha20poly1305"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/hookline/hookline/events"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// The vault's key-encryption key (KEK). Destroying a data key in the vault
// leaves its old copies wherever the vault was copied: a PostgreSQL
// table's WAL, base backups and replicas, a backup of the vault's
// directory. With a KEK store, every data key in the vault is wrapped
// under the vault's current KEK, and the KEK itself lives apart from the
// vault, in the store (object storage, or a directory of its own), sealed
// under the master key. Each erasure makes a new KEK current, rewraps
// every surviving data key under it and deletes the older KEKs from the
// store: a copy of the vault made before the erasure holds the erased key
// wrapped under a KEK that no longer exists anywhere, so it opens nothing,
// even with the master key.
//
// KEK ids carry a generation, one more than the KEK current when it was
// made: a settle deletes only KEKs of an older generation than the
// current one, once no data key is wrapped under any of them, so that two
// erasures at once, or a node that stopped midway, never destroy a KEK
// that a data key still needs.

// ErrNoKEK says that the KEK store does not hold a KEK.
var ErrNoKEK = errors.New("seal: no such key-encryption key in the store")

// KEKStore keeps the vault's key-encryption keys, each sealed under the
// master key, by id, apart from the vault: deleting one must destroy it
// (an object store without versioning, a directory). Package
// seal/kekstore implements it on object storage.
type KEKStore interface {
	// Get returns the KEK id as Put stored it, or [ErrNoKEK].
	Get(ctx context.Context, id string) ([]byte, error)
	// Put stores a KEK durably (in place of the one of that id).
	Put(ctx context.Context, id string, sealed []byte) error
	// Delete destroys a KEK; deleting one that is gone is not an error.
	Delete(ctx context.Context, id string) error
	// List returns the ids of every KEK stored.
	List(ctx context.Context) ([]string, error)
}

// UseKEKs makes p wrap the vault's data keys under key-encryption keys
// kept in store, and returns p. Call [Payloads.StartKEKs] before use.
func (p *Payloads) UseKEKs(store KEKStore) *Payloads {
	p.keks = store
	return p
}

// kekAAD binds a sealed KEK to its id.
func kekAAD(id string) []byte { return []byte("vault-kek/" + id) }

// kekGeneration is the generation of a KEK id: 0 for none ("").
func kekGeneration(id string) uint64 {
	g, _, _ := strings.Cut(strings.TrimPrefix(id, "kek_"), "_")
	n, _ := strconv.ParseUint(g, 10, 64)
	return n
}

// StartKEKs checks that the vault and this node agree on KEKs and
// finishes what an earlier node left undone: without a store, the vault
// must have no KEK (its keys would not open here); with one, the vault
// gets its first KEK if it has none, and every data key not wrapped under
// the current KEK (keys from before KEKs, or a rotation a node stopped
// in) is wrapped under it, the older KEKs deleted.
func (p *Payloads) StartKEKs(ctx context.Context) error {
	if p == nil {
		return nil
	}
	cur, err := p.vault.KEK(ctx)
	if err != nil {
		return err
	}
	switch {
	case p.keks == nil && cur != "":
		return fmt.Errorf("seal: the vault's data keys are wrapped under key-encryption key %s, kept in a KEK store this node was not given: give every node the same --vault-kek", cur)
	case p.keks == nil:
		return nil
	case cur == "":
		if _, err := p.firstKEK(ctx); err != nil {
			return err
		}
	}
	return p.SettleKEKs(ctx)
}

// firstKEK makes the vault's first KEK, unless another node did: it
// returns the current one.
func (p *Payloads) firstKEK(ctx context.Context) (string, error) {
	id, err := p.newKEK(ctx, 1)
	if err != nil {
		return "", err
	}
	if err := p.vault.SetKEK(ctx, "", id); errors.Is(err, events.ErrKEKChanged) {
		_ = p.keks.Delete(ctx, id) // never current: nothing is wrapped under it
		return p.vault.KEK(ctx)
	} else if err != nil {
		return "", err
	}
	return id, nil
}

// RotateKEK makes a new KEK current, wraps every data key under it and
// destroys the older ones: after an erasure, no copy of the vault made
// before it opens any more. Without a KEK store it does nothing.
func (p *Payloads) RotateKEK(ctx context.Context) error {
	if p == nil || p.keks == nil {
		return nil
	}
	cur, err := p.vault.KEK(ctx)
	if err != nil {
		return err
	}
	id, err := p.newKEK(ctx, kekGeneration(cur)+1)
	if err != nil {
		return err
	}
	if err := p.vault.SetKEK(ctx, cur, id); err != nil {
		_ = p.keks.Delete(ctx, id) // never current: nothing is wrapped under it
		if !errors.Is(err, events.ErrKEKChanged) {
			return err
		}
		// Another rotation made its KEK current since cur was read: it
		// destroys cur as this one would have.
	}
	return p.SettleKEKs(ctx)
}

// SettleKEKs wraps every data key of the vault that is not wrapped under
// the current KEK under it, destroys the keys whose erasure is recorded,
// and then deletes every KEK of an older generation from the store. A
// newer rotation that becomes current meanwhile takes over: this one
// stops, leaving the rest to it.
func (p *Payloads) SettleKEKs(ctx context.Context) error {
	if p == nil || p.keks == nil {
		return nil
	}
	cur, err := p.vault.KEK(ctx)
	if err != nil || cur == "" {
		return err
	}
	for range 3 {
		keys, err := p.vault.DataKeys(ctx)
		if err != nil {
			return err
		}
		stale, overtaken, err := p.rewrapAll(ctx, keys, cur)
		switch {
		case err != nil:
			return err
		case overtaken:
			return nil // a newer rotation is current: it settles
		case stale == 0:
			return p.deleteOlderKEKs(ctx, cur)
		}
	}
	return fmt.Errorf("seal: data keys of the vault keep changing while they are wrapped under key-encryption key %s; erase again later", cur)
}

// rewrapWorkers is how many data keys a settle wraps at once (each is a
// round trip to the vault).
const rewrapWorkers = 8

// rewrapAll wraps each of keys not under cur under it, rewrapWorkers at a
// time, and destroys those whose erasure is recorded. It returns how many
// were not under cur, and whether a newer KEK became current meanwhile.
func (p *Payloads) rewrapAll(ctx context.Context, keys []events.DataKey, cur string) (stale int, overtaken bool, err error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rewrapWorkers)
	var newer atomic.Bool
	for _, k := range keys {
		switch {
		case p.erased(k.TenantID, k.ID):
			g.Go(func() error { return p.Destroy(gctx, k.TenantID, k.ID) })
		case k.KEK != "" && kekGeneration(k.KEK) > kekGeneration(cur):
			// A newer rotation became current after cur was read and
			// wrapped this key already: it settles, and may have
			// destroyed cur.
			newer.Store(true)
		case k.KEK != cur:
			stale++
			g.Go(func() error {
				err := p.rewrap(gctx, k, cur)
				switch {
				case errors.Is(err, events.ErrKEKChanged):
					newer.Store(true)
					return nil
				case errors.Is(err, ErrNoKEK) && p.moved(gctx, k):
					return nil // another rotation rewrapped it and destroyed its KEK since the listing
				case errors.Is(err, ErrNoKEK) && p.overtaken(gctx, cur):
					newer.Store(true) // a newer rotation destroyed cur itself: it settles
					return nil
				case err != nil && !errors.Is(err, events.ErrDataKeyChanged):
					return fmt.Errorf("seal: wrap the data key of tenant %s under the new key-encryption key: %w", k.TenantID, err)
				}
				return nil
			})
		}
	}
	err = g.Wait()
	return stale, newer.Load(), err
}

// deleteOlderKEKs deletes from the store every KEK of an older generation
// than cur, once no data key is wrapped under one, and forgets them.
func (p *Payloads) deleteOlderKEKs(ctx context.Context, cur string) error {
	ids, err := p.keks.List(ctx)
	if err != nil {
		return err
	}
	gen := kekGeneration(cur)
	for _, id := range ids {
		if kekGeneration(id) >= gen {
			continue
		}
		if err := p.keks.Delete(ctx, id); err != nil {
			return fmt.Errorf("seal: destroy key-encryption key %s: %w", id, err)
		}
	}
	p.mu.Lock()
	for id := range p.kekOpen {
		if kekGeneration(id) < gen {
			delete(p.kekOpen, id)
		}
	}
	p.mu.Unlock()
	return nil
}

// overtaken reports whether the vault's current KEK is no longer cur.
func (p *Payloads) overtaken(ctx context.Context, cur string) bool {
	now, err := p.vault.KEK(ctx)
	return err == nil && now != cur
}

// moved reports whether the vault's key of k's tenant is no longer k as
// listed (rewrapped, or destroyed).
func (p *Payloads) moved(ctx context.Context, k events.DataKey) bool {
	now, err := p.vault.DataKey(ctx, k.TenantID)
	return errors.Is(err, events.ErrNoDataKey) || err == nil && (now.ID != k.ID || now.KEK != k.KEK)
}

// rewrap wraps a data key under the KEK cur in the vault's place of k.
func (p *Payloads) rewrap(ctx context.Context, k events.DataKey, cur string) error {
	key, _, err := p.openKey(ctx, k)
	if err != nil {
		return err
	}
	sealed, err := p.sealKey(ctx, k.TenantID, k.ID, cur, key)
	if err != nil {
		return err
	}
	return p.vault.ReplaceDataKey(ctx, k, events.DataKey{TenantID: k.TenantID, ID: k.ID, KEK: cur, Sealed: sealed})
}

// newKEK makes a KEK of generation gen, sealed under the master key, and
// stores it.
func (p *Payloads) newKEK(ctx context.Context, gen uint64) (string, error) {
	raw := make([]byte, chacha20poly1305.KeySize+8)
	if _, err := io.ReadFull(p.rand, raw); err != nil {
		return "", fmt.Errorf("seal: read a key-encryption key: %w", err)
	}
	key, idBytes := raw[:chacha20poly1305.KeySize], raw[chacha20poly1305.KeySize:]
	id := fmt.Sprintf("kek_%d_%s", gen, hex.EncodeToString(idBytes))
	sealed, err := p.sealKEK(id, key)
	if err != nil {
		return "", err
	}
	if err := p.keks.Put(ctx, id, sealed); err != nil {
		return "", fmt.Errorf("seal: store key-encryption key %s: %w", id, err)
	}
	return id, nil
}

// sealKEK seals a KEK under the current master key.
func (p *Payloads) sealKEK(id string, key []byte) ([]byte, error) {
	masterID, nonce, ct, err := p.keys.Seal(key, kekAAD(id))
	if err != nil {
		return nil, err
	}
	return proto.Marshal(&hooklinev1.SealedValue{MasterKeyId: masterID, Nonce: nonce, Ciphertext: ct})
}

// openKEK opens a KEK as the store keeps it, and says which master key
// sealed it.
func (p *Payloads) openKEK(id string, sealed []byte) ([]byte, string, error) {
	var sv hooklinev1.SealedValue
	if err := proto.Unmarshal(sealed, &sv); err != nil {
		return nil, "", fmt.Errorf("seal: key-encryption key %s is damaged: %w", id, err)
	}
	key, err := p.keys.Open(sv.GetMasterKeyId(), sv.GetNonce(), sv.GetCiphertext(), kekAAD(id))
	return key, sv.GetMasterKeyId(), err
}

// kek returns KEK id, opened: the one in memory, or the store's.
func (p *Payloads) kek(ctx context.Context, id string) (cipher.AEAD, error) {
	p.mu.Lock()
	aead := p.kekOpen[id]
	p.mu.Unlock()
	if aead != nil {
		return aead, nil
	}
	if p.keks == nil {
		return nil, fmt.Errorf("seal: data keys are wrapped under key-encryption key %s, kept in a KEK store this node was not given: give every node the same --vault-kek", id)
	}
	sealed, err := p.keks.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	key, _, err := p.openKEK(id, sealed)
	if err != nil {
		return nil, err
	}
	if aead, err = chacha20poly1305.NewX(key); err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.kekOpen[id] = aead
	p.mu.Unlock()
	return aead, nil
}

// resealKEKs seals every KEK of the store anew under the current master
// key, then settles (a KEK that a rotation deleted meanwhile and this
// wrote back is deleted again). It returns how many it resealed.
func (p *Payloads) resealKEKs(ctx context.Context) (int, error) {
	ids, err := p.keks.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		sealed, err := p.keks.Get(ctx, id)
		if errors.Is(err, ErrNoKEK) {
			continue
		}
		if err != nil {
			return n, err
		}
		key, masterID, err := p.openKEK(id, sealed)
		if err != nil {
			return n, fmt.Errorf("reseal key-encryption key %s: %w", id, err)
		}
		if masterID == p.keys.CurrentID() {
			continue
		}
		if sealed, err = p.sealKEK(id, key); err != nil {
			return n, err
		}
		if err := p.keks.Put(ctx, id, sealed); err != nil {
			return n, fmt.Errorf("reseal key-encryption key %s: %w", id, err)
		}
		n++
	}
	return n, p.SettleKEKs(ctx)
}
