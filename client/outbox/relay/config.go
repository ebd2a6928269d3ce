package relay

import (
	"cmp"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/outbox"
)

// Config configures a Worker. DB and Client are required; the zero value
// of the rest means the documented defaults.
type Config struct {
	// DB is the producer's database, where the outbox table is. The
	// Worker holds up to InFlight+1 of its connections.
	DB *pgxpool.Pool
	// Table is the outbox table; default outbox.DefaultTable.
	Table outbox.Table
	// Client publishes to Hookline. Its token decides the tenant of rows
	// with an empty tenant_id (a tenant's API key), or lets rows name
	// their tenants (the admin token).
	Client *client.Client

	// BatchSize is the most rows one batch takes (and publishes in one
	// PublishBatch). Default 100.
	BatchSize int
	// InFlight is the number of batches a Worker has in flight at once,
	// each in its own transaction. Default 2.
	InFlight int
	// PollEvery is how often an idle Worker looks for new rows. Default
	// 100 ms.
	PollEvery time.Duration
	// PublishTimeout bounds the publishing of one batch, and so how long
	// its rows stay locked by this Worker. Default 30 s.
	PublishTimeout time.Duration
	// BackoffCap is the longest wait after failed batches (Hookline down,
	// the database unreachable); the wait doubles from PollEvery up to it.
	// Default 10 s.
	BackoffCap time.Duration

	// Retention is how long relayed rows are kept after their creation,
	// for reconciliation; then the cleanup deletes them. Default 7 days;
	// negative keeps them forever (clean them yourself).
	Retention time.Duration
	// CleanupEvery is how often the cleanup runs. Default 1 min.
	CleanupEvery time.Duration
	// GaugeEvery is how often the waiting rows are counted for the
	// metrics. Default 5 s.
	GaugeEvery time.Duration

	// Registerer, if set, receives the Worker's metrics (see metrics.go).
	Registerer prometheus.Registerer
	Logger     *slog.Logger
}

// Validate reports the first missing or invalid setting.
func (c *Config) Validate() error {
	switch {
	case c.DB == nil:
		return errors.New("relay: Config.DB is nil: pass a pool of the producer's database")
	case c.Client == nil:
		return errors.New("relay: Config.Client is nil: pass a Hookline client")
	case c.BatchSize < 0, c.InFlight < 0, c.PollEvery < 0, c.PublishTimeout < 0, c.BackoffCap < 0, c.CleanupEvery < 0, c.GaugeEvery < 0:
		return errors.New("relay: BatchSize, InFlight, PollEvery, PublishTimeout, BackoffCap, CleanupEvery and GaugeEvery must not be negative")
	}
	return c.Table.Validate()
}

func (c *Config) withDefaults() {
	c.Table = cmp.Or(c.Table, outbox.DefaultTable)
	c.BatchSize = cmp.Or(c.BatchSize, 100)
	c.InFlight = cmp.Or(c.InFlight, 2)
	c.PollEvery = cmp.Or(c.PollEvery, 100*time.Millisecond)
	c.PublishTimeout = cmp.Or(c.PublishTimeout, 30*time.Second)
	c.BackoffCap = cmp.Or(c.BackoffCap, 10*time.Second)
	c.Retention = cmp.Or(c.Retention, 7*24*time.Hour)
	c.CleanupEvery = cmp.Or(c.CleanupEvery, time.Minute)
	c.GaugeEvery = cmp.Or(c.GaugeEvery, 5*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
}
