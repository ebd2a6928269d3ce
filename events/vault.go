package events

import (
	"context"
	"errors"
)

// Vault is a small mutable store beside the log for what must be
// destroyable for good: each tenant's current data key, wrapped under the
// vault's current key-encryption key (KEK), itself kept apart from the
// vault and destroyed when an erasure replaces it (package seal), or, for
// keys from before KEKs or without a KEK store, sealed under a master key.
// The log never forgets; a payload sealed under a data key is forgotten by
// destroying the key here (crypto-shredding), and every copy of the vault
// made before, by destroying the KEK that wrapped it there. A vault is
// never inside the log's own records, so a copy of the log holds no key.
//
// A backend that can keep a vault implements it on its [Log]: the
// embedded log in a directory of its own, PostgreSQL in tables of its
// own.
type Vault interface {
	// DataKey returns the tenant's current data key, or fails with
	// [ErrNoDataKey] when it has none (never had one, or it was destroyed).
	DataKey(ctx context.Context, tenantID string) (DataKey, error)

	// PutDataKey stores k as its tenant's current data key unless the
	// tenant has one already, and returns the one stored: of two nodes
	// creating a key at once, both get the same one. It fails with
	// [ErrKEKChanged], storing nothing, when k.KEK is not the vault's
	// current KEK.
	PutDataKey(ctx context.Context, k DataKey) (DataKey, error)

	// ReplaceDataKey stores k in place of the tenant's current key when that
	// key is still old (same id, KEK and sealed bytes), for a reseal under
	// a new master key or a new KEK; it fails with [ErrDataKeyChanged]
	// otherwise, and with [ErrKEKChanged] when k.KEK is not the vault's
	// current KEK.
	ReplaceDataKey(ctx context.Context, old, k DataKey) error

	// DestroyDataKey destroys the tenant's data key id, durably, if it is
	// the current one; destroying a key that is gone is not an error.
	DestroyDataKey(ctx context.Context, tenantID, id string) error

	// DataKeys lists every current data key, for a reseal.
	DataKeys(ctx context.Context) ([]DataKey, error)

	// KEK returns the id of the vault's current key-encryption key: the
	// one new data keys are wrapped under; "" for none (keys sealed under
	// the master key).
	KEK(ctx context.Context) (string, error)

	// SetKEK makes id the vault's current KEK if old is, or fails with
	// [ErrKEKChanged]. Once it returns, no data key is stored under old
	// any more: a PutDataKey or ReplaceDataKey under old either finished
	// before, or fails.
	SetKEK(ctx context.Context, old, id string) error
}

// DataKey is a tenant's data key as the vault keeps it: its id (new for
// every key, never reused), the id of the KEK it is wrapped under ("":
// sealed under a master key), and the key so sealed (the sealing and its
// format are package seal's).
type DataKey struct {
	TenantID string
	ID       string
	KEK      string
	Sealed   []byte
}

// Errors of a [Vault].
var (
	ErrNoDataKey      = errors.New("events: the tenant has no data key")
	ErrDataKeyChanged = errors.New("events: the tenant's data key changed")
	ErrKEKChanged     = errors.New("events: the vault's key-encryption key changed")
)

// Archiver keeps records past the log's retention (package
// events/archive). A backend that drops expiring streams hands each batch
// of whole streams to Archive first, and drops them only once it returned
// nil.
type Archiver interface {
	Archive(ctx context.Context, recs []Record) error
}

// StreamArchive reads streams back from an archive (package
// events/archive): the records of a stream retention dropped, in revision
// order, or [ErrStreamNotFound].
type StreamArchive interface {
	ReadStream(ctx context.Context, stream string) ([]Record, error)
}

// StreamDropper drops named expiring streams (event and delivery streams)
// before the log's retention would: a tenant's shorter retention. Other
// streams are left alone. It returns how many streams it dropped.
type StreamDropper interface {
	DropStreams(ctx context.Context, streams []string) (int, error)
}
