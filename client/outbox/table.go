package outbox

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// DefaultTable is the outbox table's name when none is given.
const DefaultTable Table = "hookline_outbox"

// Table is the name of an outbox table, "name" or "schema.name", each
// part 1 to 55 characters of [A-Za-z0-9_] not starting with a digit (the
// names of its indexes add a suffix, within PostgreSQL's 63). The zero
// value means DefaultTable. Names are quoted in SQL, so case is kept.
type Table string

// ErrTableName is the error of a table name that is not valid.
var ErrTableName = errors.New("outbox: table name must be name or schema.name, each of letters, digits and '_' (at most 55, not starting with a digit)")

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,54}$`)

// Validate reports whether t is a valid name.
func (t Table) Validate() error {
	parts := strings.Split(string(t.orDefault()), ".")
	if len(parts) > 2 {
		return fmt.Errorf("%w: %q", ErrTableName, string(t))
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return fmt.Errorf("%w: %q", ErrTableName, string(t))
		}
	}
	return nil
}

func (t Table) orDefault() Table {
	if t == "" {
		return DefaultTable
	}
	return t
}

// Ident returns the table's name quoted for SQL ("schema"."name"). It
// panics on a name that Validate refuses: validate names from
// configuration first.
func (t Table) Ident() string {
	if err := t.Validate(); err != nil {
		panic(err)
	}
	parts := strings.Split(string(t.orDefault()), ".")
	for i, p := range parts {
		parts[i] = `"` + p + `"`
	}
	return strings.Join(parts, ".")
}

// base is the table's name without its schema, for the names of its
// indexes (which live in the table's schema).
func (t Table) base() string {
	s := string(t.orDefault())
	return s[strings.LastIndexByte(s, '.')+1:]
}

// SQL returns the statements that create the table and its indexes, if
// they do not exist: run them in your migrations, or with Create. The
// columns are documented in the package documentation.
func (t Table) SQL() string {
	return fmt.Sprintf(tableSQL, t.Ident(), `"`+t.base()+`_waiting"`, `"`+t.base()+`_created"`, `"`+t.base()+`_refused"`)
}

const tableSQL = `CREATE TABLE IF NOT EXISTS %[1]s (
	seq            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	tenant_id      text        NOT NULL DEFAULT '',
	event_id       text        NOT NULL CHECK (event_id ~ '^[A-Za-z0-9._:-]{1,128}$'),
	event_type     text        NOT NULL CHECK (event_type <> ''),
	schema_version text        NOT NULL DEFAULT '',
	object_id      text        NOT NULL DEFAULT '',
	object_version bigint      NOT NULL DEFAULT 0,
	occurred_at    timestamptz NOT NULL DEFAULT now(),
	content_type   text        NOT NULL DEFAULT 'application/json',
	payload        bytea       NOT NULL,
	created_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
	relayed_at     timestamptz,
	duplicate      boolean,
	refused_at     timestamptz,
	refusal        text,
	UNIQUE (tenant_id, event_id)
);
CREATE INDEX IF NOT EXISTS %[2]s ON %[1]s (seq) WHERE relayed_at IS NULL AND refused_at IS NULL;
CREATE INDEX IF NOT EXISTS %[3]s ON %[1]s (created_at, seq);
CREATE INDEX IF NOT EXISTS %[4]s ON %[1]s (seq) WHERE refused_at IS NOT NULL;
`

// Create runs the table's SQL on db (a pgx connection or pool, or a
// transaction of one).
func Create[T any](ctx context.Context, db PgxExecer[T], t Table) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, t.SQL()); err != nil {
		return fmt.Errorf("outbox: create %s: %w", t.orDefault(), err)
	}
	return nil
}

// CreateSQL is Create for database/sql.
func CreateSQL(ctx context.Context, db SQLExecer, t Table) error {
	if err := t.Validate(); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, t.SQL()); err != nil {
		return fmt.Errorf("outbox: create %s: %w", t.orDefault(), err)
	}
	return nil
}
