// Package outbox is the producer's side of the transactional outbox: the
// layout of the outbox table in the producer's own PostgreSQL database, and
// a helper that writes an event into it inside the transaction that commits
// the business change. `hookline relay` (client/outbox/relay) then moves
// committed rows into Hookline. There is no dual write: the event exists
// exactly when the business change commits, and the relay publishes it at
// least once, idempotently by event id.
//
//	producer's transaction ─▶ outbox table ─▶ hookline relay ─▶ client.PublishBatch ─▶ Hookline
//	(UPDATE invoices …;        (this package)   (client/outbox/relay)
//	 outbox.Insert …; COMMIT)
//
// It imports neither pgx nor gRPC: Insert is generic over the Exec method
// of a pgx transaction, and InsertSQL takes a database/sql one; a producer
// that writes events compiles in only this package and uuid.
//
// # The table
//
// Table.SQL prints the statements (`hookline outbox schema` too); Create
// runs them. One row is one event:
//
//	seq             bigint identity, primary key: insertion order. The
//	                relay takes waiting rows oldest first, but nothing
//	                depends on seq being gap-free or committed in order.
//	tenant_id       text, '' by default: the tenant to publish for. Empty
//	                when the relay runs with a tenant's API key; set when it
//	                runs with the admin token for many tenants.
//	event_id        text: the event's id in Hookline, unique per tenant
//	                (UNIQUE (tenant_id, event_id)); [A-Za-z0-9._:-], 1 to
//	                128 characters (a CHECK). Publishing is idempotent by
//	                it, which is what makes the relay safe to repeat.
//	event_type      text: a dotted name such as invoice.paid
//	schema_version  text, object_id text, object_version bigint,
//	occurred_at     timestamptz (the transaction's time by default),
//	content_type    text (application/json by default),
//	payload         bytea: the event as Hookline's Publish takes it; the
//	                payload bytes are delivered and signed as they are.
//	created_at      timestamptz, clock_timestamp() at insert: the row's age
//	                for the relay's metrics, reconciliation ranges and
//	                retention.
//	relayed_at      timestamptz: set by the relay once Hookline accepted the
//	                event. NULL (with refused_at NULL) means waiting.
//	duplicate       boolean: Hookline had accepted the event already when
//	                the relay published it (a relay died after publishing
//	                and before marking the row, or another path published
//	                it); nothing new was written then.
//	refused_at      timestamptz, refusal text: Hookline refused the event
//	                for good (an invalid field, or the id already published
//	                with another payload). The row waits for a person: fix
//	                it and set refused_at back to NULL to relay it again.
//
// Indexes: the waiting rows by seq (partial: the relay's queue), (created_at,
// seq) (reconciliation and retention), and the refused rows (partial, nearly
// always empty). Producers never update or delete rows; the relay marks
// them and deletes relayed rows after its retention.
//
// # Writing an event
//
// Insert (pgx) and InsertSQL (database/sql) check the event (what Hookline
// would refuse for sure), give it a UUIDv7 id when it has none, and insert
// the row with the caller's transaction: it commits or rolls back with the
// business change. A rolled back row never existed, so it is never
// relayed.
package outbox
