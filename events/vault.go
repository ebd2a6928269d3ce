package events

import (
	"context"
	"errors"
)

// Vault is a small mutable store beside the log for what must be
// destroyable for good: each tenant's current data key, sealed under a
// master key. The log never forgets; a payload sealed under a data key is
// forgotten by destroying the key here (crypto-shredding). A vault is
// never inside the log's own files or tables, so a backup of the log holds
// no key: back the vault up apart, and keep those backups no longer than
// an erasure may wait.
//
// A backend that can keep a vault implements it on its [Log]: the
// embedded log in a directory of its own, PostgreSQL in a table of its
// own, KurrentDB in one stream per tenant that erasure tombstones.
type Vault interface {
	// DataKey returns the tenant's current data key, or fails with
	// [ErrNoDataKey] when it has none (never had one, or it was destroyed).
	DataKey(ctx context.Context, tenantID string) (DataKey, error)

	// PutDataKey stores k as its tenant's current data key unless the
	// tenant has one already, and returns the one stored: of two nodes
	// creating a key at once, both get the same one.
	PutDataKey(ctx context.Context, k DataKey) (DataKey, error)

	// ReplaceDataKey stores k in place of the tenant's current key when that
	// key is still old (same id and sealed bytes), for a reseal under a new
	// master key; it fails with [ErrDataKeyChanged] otherwise.
	ReplaceDataKey(ctx context.Context, old, k DataKey) error

	// DestroyDataKey destroys the tenant's data key id, durably, if it is
	// the current one; destroying a key that is gone is not an error.
	DestroyDataKey(ctx context.Context, tenantID, id string) error

	// DataKeys lists every current data key, for a reseal.
	DataKeys(ctx context.Context) ([]DataKey, error)
}

// DataKey is a tenant's data key as the vault keeps it: its id (new for
// every key, never reused) and the key sealed under a master key (the
// sealing and its format are package seal's).
type DataKey struct {
	TenantID string
	ID       string
	Sealed   []byte
}

// Errors of a [Vault].
var (
	ErrNoDataKey      = errors.New("events: the tenant has no data key")
	ErrDataKeyChanged = errors.New("events: the tenant's data key changed")
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
