package postgres

import (
	"cmp"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/events"
)

// Defaults of the zero Config.
const (
	// DefaultSchema is the PostgreSQL schema that holds the log's tables.
	DefaultSchema = "hookline"
	// DefaultRetention is how long event and delivery streams are kept
	// after their first event: the 30 days of history Hookline promises.
	DefaultRetention = 30 * 24 * time.Hour
	// DefaultPartitionEvery is the width of one time partition of the
	// expiring events: a day.
	DefaultPartitionEvery = 24 * time.Hour
	// DefaultMaintainEvery is how often Run creates partitions ahead and
	// drops expired ones.
	DefaultMaintainEvery = time.Hour
	// DefaultPollEvery bounds how long a live subscriber waits when a
	// notification is lost: it reads the log at least this often.
	DefaultPollEvery = 2 * time.Second
)

// Config configures [Open]. Its zero value is usable: it connects as libpq
// would with no arguments (the PGHOST, PGUSER, ... environment variables and
// their defaults) and uses the defaults below.
type Config struct {
	// DSN is a PostgreSQL connection string, a URL such as
	// "postgres://user:password@127.0.0.1:5432/db?sslmode=disable" or
	// key=value pairs. pgxpool's own parameters (pool_max_conns, ...) may
	// be added to it. Default: "", libpq's environment and defaults.
	DSN string
	// Schema is the PostgreSQL schema of the log's tables and function,
	// created by Open when missing: lower-case letters, digits and '_',
	// starting with a letter or '_', at most 48 bytes. Several logs may
	// live in one database under different schemas. Default:
	// [DefaultSchema].
	Schema string
	// MaxEventSize caps one event's data plus metadata, in bytes. Default:
	// [events.DefaultMaxEventSize].
	MaxEventSize int
	// Retention is how long an event or delivery stream ([events.Expires])
	// is kept after its first event; it is dropped with its time partition
	// once the whole partition is older. Default: [DefaultRetention].
	Retention time.Duration
	// PartitionEvery is the width of the time partitions of expiring
	// streams, at least a minute. Default: [DefaultPartitionEvery].
	PartitionEvery time.Duration
	// Archive, when set, receives the records of each time partition
	// before it is dropped (package events/archive); a partition is
	// dropped only once archived whole.
	Archive events.Archiver
	// MaintainEvery is how often [Log.Run] maintains the partitions.
	// Default: [DefaultMaintainEvery].
	MaintainEvery time.Duration
	// PollEvery is the fallback poll of live subscribers, for a lost
	// notification. Default: [DefaultPollEvery].
	PollEvery time.Duration
	// Now is the clock that stamps records and drives retention. Default:
	// time.Now.
	Now func() time.Time
	// Logger receives the log's messages. Default: slog.Default().
	Logger *slog.Logger
}

// schemaName is what Config.Schema accepts: names that need no quoting and
// leave room for the log's own suffixes within PostgreSQL's 63 bytes.
var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,47}$`)

// Validate reports the first invalid field, naming the field and the fix.
// Zero values are valid: they mean the defaults.
func (c Config) Validate() error {
	if c.DSN != "" {
		if _, err := pgxpool.ParseConfig(c.DSN); err != nil {
			return fmt.Errorf("postgres: Config.DSN %q is not a valid connection string (want e.g. %q): %s",
				redact(c.DSN), "postgres://user:password@127.0.0.1:5432/hookline?sslmode=disable", redactErr(err, c.DSN))
		}
	}
	if c.Schema != "" && !schemaName.MatchString(c.Schema) {
		return fmt.Errorf("postgres: Config.Schema %q: use lower-case letters, digits and '_' (not first), at most 48 bytes, or \"\" for %q",
			c.Schema, DefaultSchema)
	}
	if c.MaxEventSize < 0 {
		return fmt.Errorf("postgres: Config.MaxEventSize is %d: set a positive byte count, or 0 for the default %d",
			c.MaxEventSize, events.DefaultMaxEventSize)
	}
	if c.Retention < 0 {
		return fmt.Errorf("postgres: Config.Retention is %s: set a positive duration, or 0 for the default %s",
			c.Retention, DefaultRetention)
	}
	if c.PartitionEvery != 0 && c.PartitionEvery < time.Minute {
		return fmt.Errorf("postgres: Config.PartitionEvery is %s: set at least 1m, or 0 for the default %s",
			c.PartitionEvery, DefaultPartitionEvery)
	}
	if c.MaintainEvery < 0 {
		return fmt.Errorf("postgres: Config.MaintainEvery is %s: set a positive duration, or 0 for the default %s",
			c.MaintainEvery, DefaultMaintainEvery)
	}
	if c.PollEvery < 0 {
		return fmt.Errorf("postgres: Config.PollEvery is %s: set a positive duration, or 0 for the default %s",
			c.PollEvery, DefaultPollEvery)
	}
	return nil
}

// withDefaults returns c with its zero fields replaced by the defaults.
func (c Config) withDefaults() Config {
	c.Schema = cmp.Or(c.Schema, DefaultSchema)
	c.MaxEventSize = cmp.Or(c.MaxEventSize, events.DefaultMaxEventSize)
	c.Retention = cmp.Or(c.Retention, DefaultRetention)
	c.PartitionEvery = cmp.Or(c.PartitionEvery, DefaultPartitionEvery)
	c.MaintainEvery = cmp.Or(c.MaintainEvery, DefaultMaintainEvery)
	c.PollEvery = cmp.Or(c.PollEvery, DefaultPollEvery)
	if c.Now == nil {
		c.Now = time.Now
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Passwords in connection strings, as a URL's user info or a password=
// key, for redact.
var (
	urlPassword = regexp.MustCompile(`(://[^:/@]*:)[^@]*@`)
	kvPassword  = regexp.MustCompile(`(password\s*=\s*)('[^']*'|\S+)`)
)

// redact returns dsn with its password replaced, for messages; it does not
// need dsn to parse.
func redact(dsn string) string {
	dsn = urlPassword.ReplaceAllString(dsn, "${1}xxxxx@")
	return kvPassword.ReplaceAllString(dsn, "${1}xxxxx")
}

// redactErr returns err's message without dsn in it.
func redactErr(err error, dsn string) string {
	return strings.ReplaceAll(err.Error(), dsn, redact(dsn))
}
