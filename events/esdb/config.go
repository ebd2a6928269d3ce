package esdb

import (
	"cmp"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/kurrent-io/KurrentDB-Client-Go/kurrentdb"

	"github.com/hookline/hookline/events"
)

// DefaultConnectionString is the address of a local, insecure, single node:
// the one that docker/compose.esdb.yaml starts.
const DefaultConnectionString = "kurrentdb://localhost:2113?tls=false"

// DefaultRetention is how long event and delivery streams are kept: the 30
// days of history that Hookline promises.
const DefaultRetention = 30 * 24 * time.Hour

// Config configures [Open]. The zero value is usable: it connects to
// [DefaultConnectionString] with the defaults below.
type Config struct {
	// ConnectionString is a KurrentDB/EventStoreDB connection string, such
	// as "kurrentdb://localhost:2113?tls=false" or
	// "esdb://admin:changeit@node1:2113,node2:2113?tls=true". Default:
	// [DefaultConnectionString].
	ConnectionString string
	// MaxEventSize caps one event's data plus metadata, checked before
	// sending. Default: [events.DefaultMaxEventSize]. The server's own cap
	// (KURRENTDB_MAX_APPEND_SIZE, 1 MiB by default, counted per append and
	// including the event type) must be larger; docker/compose.esdb.yaml
	// raises it.
	MaxEventSize int
	// Retention is the $maxAge given to event and delivery streams
	// (see [events.Expires]). Default: [DefaultRetention].
	Retention time.Duration
	// Logger receives resubscriptions and the client library's own
	// messages (at debug level). Default: slog.Default().
	Logger *slog.Logger
}

// Validate reports the first invalid field, naming the field and the fix.
// Zero values are valid: they mean the defaults.
func (c Config) Validate() error {
	if c.ConnectionString != "" {
		if _, err := kurrentdb.ParseConnectionString(c.ConnectionString); err != nil {
			// The parser's message may quote the string, password and all.
			reason := strings.ReplaceAll(err.Error(), c.ConnectionString, redact(c.ConnectionString))
			return fmt.Errorf("esdb: Config.ConnectionString %q is not a valid connection string (want e.g. %q): %s",
				redact(c.ConnectionString), DefaultConnectionString, reason)
		}
	}
	if c.MaxEventSize < 0 {
		return fmt.Errorf("esdb: Config.MaxEventSize is %d: set a positive byte count, or 0 for the default %d",
			c.MaxEventSize, events.DefaultMaxEventSize)
	}
	if c.Retention < 0 {
		return fmt.Errorf("esdb: Config.Retention is %s: set a positive duration, or 0 for the default %s",
			c.Retention, DefaultRetention)
	}
	if c.Retention > 0 && c.Retention < time.Second {
		return fmt.Errorf("esdb: Config.Retention is %s: $maxAge counts whole seconds, set at least 1s", c.Retention)
	}
	return nil
}

// withDefaults returns c with its zero fields replaced by the defaults.
func (c Config) withDefaults() Config {
	c.ConnectionString = cmp.Or(c.ConnectionString, DefaultConnectionString)
	c.MaxEventSize = cmp.Or(c.MaxEventSize, events.DefaultMaxEventSize)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}
