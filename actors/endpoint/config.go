package endpoint

import (
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/hookline/hookline/actors/attempt"
	"github.com/hookline/hookline/actors/seal"
	"github.com/hookline/hookline/events"
)

// Defaults of the zero Config.
const (
	DefaultIOTimeout = 10 * time.Second
	DefaultReadPage  = 256
	// maxTimer bounds one wait of the retirement timer, so that a clock jump
	// is noticed within it.
	maxTimer = time.Hour
)

// Config configures the endpoint grain. Its zero value is invalid only for
// lack of Log and Keyring; every other field has a documented default.
type Config struct {
	// Log is the event log holding endpoint-{endpoint_id}. Required.
	Log events.Log
	// Keyring seals new secrets and opens old ones. Required.
	Keyring *seal.Keyring
	// Policy checks URLs at create and update; nil means the zero Policy
	// (production rules: https on 443, public addresses only).
	Policy *attempt.Policy
	// Now is the clock stamping events and ending rotation overlaps; nil
	// means time.Now.
	Now func() time.Time
	// Rand supplies secrets and ed25519 seeds; nil means crypto/rand.Reader.
	Rand io.Reader
	// Logger receives the grain's messages (never a secret); nil means
	// slog.Default().
	Logger *slog.Logger
	// IOTimeout bounds one read of the stream, one URL check and one
	// append; 0 means DefaultIOTimeout (10 s).
	IOTimeout time.Duration
	// ReadPage is how many events one read of the stream asks for; 0 means
	// DefaultReadPage.
	ReadPage int
	// DefaultOverlap is how long a previous secret stays live after a
	// rotation that does not say; 0 means DefaultOverlap (24 h).
	DefaultOverlap time.Duration
}

// Validate reports whether c is usable.
func (c Config) Validate() error {
	var errs []error
	if c.Log == nil {
		errs = append(errs, errors.New("endpoint: config: log is required"))
	}
	if c.Keyring == nil {
		errs = append(errs, errors.New("endpoint: config: keyring is required (seal.LoadKeyring)"))
	}
	if c.IOTimeout < 0 || c.ReadPage < 0 || c.DefaultOverlap < 0 || c.DefaultOverlap > MaxOverlap {
		errs = append(errs, errors.New("endpoint: config: durations and sizes must not be negative; default overlap at most 30 days"))
	}
	return errors.Join(errs...)
}

func (c Config) withDefaults() Config {
	if c.Policy == nil {
		c.Policy = &attempt.Policy{}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Rand == nil {
		c.Rand = rand.Reader
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.IOTimeout == 0 {
		c.IOTimeout = DefaultIOTimeout
	}
	if c.ReadPage == 0 {
		c.ReadPage = DefaultReadPage
	}
	if c.DefaultOverlap == 0 {
		c.DefaultOverlap = DefaultOverlap
	}
	return c
}
