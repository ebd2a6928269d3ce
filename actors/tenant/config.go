package tenant

import (
	"cmp"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/hookline/hookline/events"
)

// Defaults of the zero Config.
const (
	DefaultIOTimeout         = 10 * time.Second
	DefaultLeaseDuration     = time.Second
	DefaultAttemptsPerSecond = 100
	DefaultMaxInFlight       = 100
	DefaultReadPage          = 256
	DefaultIdleAfter         = 2 * time.Minute
)

// Config configures the tenant grain. Its zero value is invalid only for
// lack of Log; every other field has a documented default.
type Config struct {
	// Log is the event log holding tenant-{tenant_id}. Required.
	Log events.Log
	// Now is the clock stamping events and leases; nil means time.Now.
	Now func() time.Time
	// Rand supplies API keys; nil means crypto/rand.Reader.
	Rand io.Reader
	// Logger receives the grain's messages; nil means slog.Default().
	Logger *slog.Logger
	// IOTimeout bounds one read of the stream on activation and one append;
	// 0 means DefaultIOTimeout (10 s).
	IOTimeout time.Duration
	// ReadPage is how many events one read of the stream asks for; 0 means
	// DefaultReadPage.
	ReadPage int
	// LeaseDuration is how long a quota lease lasts; 0 means
	// DefaultLeaseDuration (1 s). Endpoints that asked within three lease
	// durations share the quota.
	LeaseDuration time.Duration
	// DefaultAttemptsPerSecond and DefaultMaxInFlight apply to a tenant whose
	// quota leaves them 0; 0 here means the package defaults (100 and 100).
	DefaultAttemptsPerSecond float64
	DefaultMaxInFlight       int32
	// IdleAfter is the quiet period after which the grain leaves memory
	// (passivates): no message for that long. The next command activates
	// it again, rebuilt from its stream. 0 means DefaultIdleAfter (2 min).
	IdleAfter time.Duration
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.Log == nil {
		errs = append(errs, errors.New("tenant: config: log is required"))
	}
	if c.IOTimeout < 0 || c.LeaseDuration < 0 || c.ReadPage < 0 || c.DefaultAttemptsPerSecond < 0 || c.DefaultMaxInFlight < 0 || c.IdleAfter < 0 {
		errs = append(errs, errors.New("tenant: config: durations, sizes and quota defaults must not be negative"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.IOTimeout = cmp.Or(c.IOTimeout, DefaultIOTimeout)
	c.ReadPage = cmp.Or(c.ReadPage, DefaultReadPage)
	c.LeaseDuration = cmp.Or(c.LeaseDuration, DefaultLeaseDuration)
	c.DefaultAttemptsPerSecond = cmp.Or(c.DefaultAttemptsPerSecond, DefaultAttemptsPerSecond)
	c.DefaultMaxInFlight = cmp.Or(c.DefaultMaxInFlight, DefaultMaxInFlight)
	c.IdleAfter = cmp.Or(c.IdleAfter, DefaultIdleAfter)
	return c
}
