package due

import (
	"log/slog"
	"time"

	"github.com/hookline/hookline/internal/confcheck"
)

// Defaults of the zero Config.
const (
	DefaultSweepInterval = 5 * time.Second
	DefaultStaleAfter    = 10 * time.Second
	DefaultLimit         = 100
	// DefaultCheckpointAfter is how long an ordered key's last sequence
	// waits unchecked before its endpoint's grain checkpoints it: far
	// below any retention, and long enough that a busy key is written
	// at most once per period.
	DefaultCheckpointAfter = 10 * time.Minute
)

// Waker is told that an endpoint has work due, so that its grain pulls.
// Wakes are hints: they may repeat and the grain finds out what is due by
// calling [Due.Pull]. Wake is called from the runner's goroutine and must
// not block.
type Waker interface {
	Wake(endpointID string)
}

// Config configures a [Due]. The zero value is valid: no waker, the default
// sweep.
type Config struct {
	// Waker is told when an endpoint has work due; nil wakes nobody.
	Waker Waker
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// SweepInterval is how often Run looks for stale endpoints; 0 means
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// StaleAfter is how long due work may wait before the sweeper wakes its
	// endpoint again; 0 means DefaultStaleAfter.
	StaleAfter time.Duration
	// Tokens makes ordering keys' tokens, with which Pull numbers the
	// heads it returns (*seal.Payloads); nil leaves them to the grain.
	Tokens Tokens
	// CheckpointAfter is how long an ordered key's last sequence may wait
	// unchecked before the sweeper wakes its endpoint to checkpoint it
	// (see order_checkpoint.go); 0 means DefaultCheckpointAfter. It must be well
	// below the log's retention.
	CheckpointAfter time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether c can be used.
func (c Config) Validate() error {
	return confcheck.All("due config",
		confcheck.NotNegative("sweep interval", c.SweepInterval),
		confcheck.NotNegative("stale after", c.StaleAfter),
		confcheck.NotNegative("checkpoint after", c.CheckpointAfter),
	)
}

func (c Config) withDefaults() Config {
	if c.Waker == nil {
		c.Waker = nopWaker{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SweepInterval == 0 {
		c.SweepInterval = DefaultSweepInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	if c.CheckpointAfter == 0 {
		c.CheckpointAfter = DefaultCheckpointAfter
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

type nopWaker struct{}

func (nopWaker) Wake(string) {}
