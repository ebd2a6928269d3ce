package embedded

import (
	"cmp"
	"errors"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/internal/confcheck"
)

// Defaults of the zero Config.
const (
	DefaultRetention   = 30 * 24 * time.Hour
	DefaultRetainEvery = time.Hour
)

// Config configures a [Log]. Its zero value is invalid only for lack of
// Dir; every other field has a documented default.
type Config struct {
	// Dir is the directory of the Pebble store, created when missing.
	// Required.
	Dir string
	// VaultDir is the directory of the data-key vault (see
	// [events.Vault]), apart from the store so that a copy of the store
	// holds no key; "" means Dir with "-vault" appended.
	VaultDir string
	// FS is the file system the store lives on; nil means the disk.
	// Tests pass vfs.NewMem().
	FS vfs.FS
	// MaxEventSize caps one event's data plus metadata, in bytes; 0 means
	// events.DefaultMaxEventSize.
	MaxEventSize int
	// Retention is how long an event or delivery stream is kept after its
	// last write; 0 means DefaultRetention (30 days).
	Retention time.Duration
	// RetainEvery is how often Run applies retention; 0 means
	// DefaultRetainEvery (hourly).
	RetainEvery time.Duration
	// Archive, when set, receives the records of the streams retention
	// drops, before they are dropped (package events/archive).
	Archive events.Archiver
	// Now is the clock that stamps records and drives retention; nil means
	// time.Now.
	Now func() time.Time
	// Logger receives the log's and Pebble's messages; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c can be opened.
func (c Config) Validate() error {
	var dir error
	if c.Dir == "" {
		dir = errors.New("dir is required")
	}
	return confcheck.All("embedded config", dir,
		confcheck.NotNegative("max event size", c.MaxEventSize),
		confcheck.NotNegative("retention", c.Retention),
		confcheck.NotNegative("retain every", c.RetainEvery),
	)
}

// withDefaults returns c with its zero fields set to their defaults.
func (c Config) withDefaults() Config {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	c.VaultDir = cmp.Or(c.VaultDir, filepath.Clean(c.Dir)+"-vault")
	c.MaxEventSize = cmp.Or(c.MaxEventSize, events.DefaultMaxEventSize)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.RetainEvery = cmp.Or(c.RetainEvery, DefaultRetainEvery)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}
