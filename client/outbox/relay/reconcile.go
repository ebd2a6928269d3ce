package relay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/outbox"
)

// ReconcileConfig says what to reconcile. DB, Client and Since are
// required.
type ReconcileConfig struct {
	DB     *pgxpool.Pool
	Table  outbox.Table
	Client *client.Client
	// Since and Until bound the rows' creation times: [Since, Until).
	// A zero Until means now.
	Since, Until time.Time
	// Repair publishes the rows found missing (waiting or lost), as the
	// relay would: idempotently, by event id.
	Repair bool
	// MaxListed bounds the event ids the Report lists per kind (the counts
	// are always exact). Default 100.
	MaxListed int
	Logger    *slog.Logger
}

// Report is the outcome of Reconcile: every committed outbox row created
// in the range falls in exactly one of Accepted, Mismatched, Refused,
// Waiting and Lost.
type Report struct {
	Since, Until time.Time
	// Rows are the committed rows created in the range.
	Rows int
	// Accepted rows are events Hookline accepted with the row's payload.
	Accepted int
	// Mismatched rows are events Hookline accepted with another payload:
	// the row changed after it was published, or the id was used twice.
	Mismatched Kind
	// Refused rows were refused by Hookline for good (see the outbox's
	// refused_at and refusal columns).
	Refused Kind
	// Waiting rows are not relayed yet and Hookline does not have them:
	// the relay's lag, or no relay is running.
	Waiting Kind
	// Lost rows are marked relayed but Hookline does not have them: an
	// event past Hookline's retention (30 days), or a loss to explain.
	Lost Kind
	// Repaired are the missing rows that Repair published; Hookline
	// answered that RepairedDuplicates of them it had accepted meanwhile
	// (the relay was faster).
	Repaired, RepairedDuplicates int
}

// Missing is the number of rows Hookline does not have: waiting, lost and
// refused.
func (r *Report) Missing() int { return r.Waiting.Count + r.Lost.Count + r.Refused.Count }

// Kind counts rows of one kind and lists their event ids (up to
// MaxListed), tenant-qualified ("tenant/id") when the row names a tenant.
type Kind struct {
	Count int
	IDs   []string
}

func (k *Kind) add(r *reconRow, max int) {
	k.Count++
	if len(k.IDs) < max {
		id := r.eventID
		if r.tenantID != "" {
			id = r.tenantID + "/" + id
		}
		k.IDs = append(k.IDs, id)
	}
}

// reconPage bounds the rows read (and looked up) at once.
const reconPage = 1000

// reconRow is one outbox row as reconciliation sees it.
type reconRow struct {
	seq              int64
	created          time.Time
	tenantID         string
	eventID          string
	sum              []byte
	relayed, refused bool
}

// Reconcile compares the committed outbox rows created in [Since, Until)
// with the events Hookline accepted (client.LookupEvents, which reads
// Hookline's log), and with Repair publishes the missing ones. It reads
// the rows in pages, so its memory does not grow with the range. It does
// not change the outbox. Rows deleted by a relay's retention, and events
// past Hookline's, cannot be compared: keep the range within both.
func Reconcile(ctx context.Context, cfg ReconcileConfig) (*Report, error) {
	switch {
	case cfg.DB == nil || cfg.Client == nil:
		return nil, errors.New("relay: ReconcileConfig.DB and Client are required")
	case cfg.Since.IsZero():
		return nil, errors.New("relay: ReconcileConfig.Since is required")
	}
	if err := cfg.Table.Validate(); err != nil {
		return nil, err
	}
	if cfg.Until.IsZero() {
		cfg.Until = time.Now()
	}
	if cfg.MaxListed == 0 {
		cfg.MaxListed = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Since: cfg.Since, Until: cfg.Until}
	after := reconRow{created: cfg.Since, seq: -1}
	for {
		page, err := readPage(ctx, &cfg, after)
		if err != nil {
			return rep, err
		}
		if len(page) == 0 {
			return rep, nil
		}
		if err := reconcilePage(ctx, &cfg, page, rep); err != nil {
			return rep, err
		}
		after = page[len(page)-1]
	}
}

// readPage reads the next rows of the range after the keyset (created, seq).
func readPage(ctx context.Context, cfg *ReconcileConfig, after reconRow) ([]reconRow, error) {
	rows, err := cfg.DB.Query(ctx, `SELECT seq, created_at, tenant_id, event_id, sha256(payload), relayed_at IS NOT NULL, refused_at IS NOT NULL
		FROM `+cfg.Table.Ident()+` WHERE (created_at, seq) > ($1, $2) AND created_at < $3
		ORDER BY created_at, seq LIMIT $4`, after.created, after.seq, cfg.Until, reconPage)
	if err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	defer rows.Close()
	var out []reconRow
	for rows.Next() {
		var r reconRow
		if err := rows.Scan(&r.seq, &r.created, &r.tenantID, &r.eventID, &r.sum, &r.relayed, &r.refused); err != nil {
			return nil, fmt.Errorf("read outbox: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read outbox: %w", err)
	}
	return out, nil
}

// reconcilePage looks the page's rows up in Hookline, tenant by tenant,
// sorts them into the report, and repairs the missing ones if asked.
func reconcilePage(ctx context.Context, cfg *ReconcileConfig, page []reconRow, rep *Report) error {
	byTenant := map[string][]*reconRow{}
	var tenants []string
	for i := range page {
		r := &page[i]
		if _, ok := byTenant[r.tenantID]; !ok {
			tenants = append(tenants, r.tenantID)
		}
		byTenant[r.tenantID] = append(byTenant[r.tenantID], r)
	}
	var repair []int64
	for _, tenant := range tenants {
		rows := byTenant[tenant]
		ids := make([]string, len(rows))
		for i, r := range rows {
			ids[i] = r.eventID
		}
		found, _, err := cfg.Client.LookupEvents(ctx, tenant, ids)
		if err != nil {
			return fmt.Errorf("look up events of tenant %q: %w", tenant, err)
		}
		sums := make(map[string][]byte, len(found))
		for _, ev := range found {
			sums[ev.GetEventId()] = ev.GetPayloadSha256()
		}
		for _, r := range rows {
			rep.Rows++
			sum, ok := sums[r.eventID]
			switch {
			case ok && bytes.Equal(sum, r.sum):
				rep.Accepted++
			case ok:
				rep.Mismatched.add(r, cfg.MaxListed)
			case r.refused:
				rep.Refused.add(r, cfg.MaxListed)
			case r.relayed:
				rep.Lost.add(r, cfg.MaxListed)
				repair = append(repair, r.seq)
			default:
				rep.Waiting.add(r, cfg.MaxListed)
				repair = append(repair, r.seq)
			}
		}
	}
	if cfg.Repair && len(repair) > 0 {
		return repairRows(ctx, cfg, repair, rep)
	}
	return nil
}

// repairRows publishes the rows seqs as the relay would, without changing
// the outbox (a relay marks them when it gets to them, as duplicates).
func repairRows(ctx context.Context, cfg *ReconcileConfig, seqs []int64, rep *Report) error {
	rows, err := cfg.DB.Query(ctx, `SELECT tenant_id, event_id, event_type, schema_version, object_id, object_version, occurred_at, content_type, payload
		FROM `+cfg.Table.Ident()+` WHERE seq = ANY($1) ORDER BY seq`, seqs)
	if err != nil {
		return fmt.Errorf("read rows to repair: %w", err)
	}
	var evs []client.Event
	for rows.Next() {
		var e client.Event
		if err := rows.Scan(&e.TenantID, &e.ID, &e.Type, &e.SchemaVersion, &e.ObjectID, &e.ObjectVersion, &e.OccurredAt, &e.ContentType, &e.Payload); err != nil {
			rows.Close()
			return fmt.Errorf("read rows to repair: %w", err)
		}
		evs = append(evs, e)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read rows to repair: %w", err)
	}
	results, err := cfg.Client.PublishBatch(ctx, evs)
	for i, r := range results {
		switch {
		case r.Err != nil:
			cfg.Logger.Warn("repair: publish failed", slog.String("tenant_id", evs[i].TenantID), slog.String("event_id", evs[i].ID), slog.String("error", r.Err.Error()))
		case r.Response.GetDuplicate():
			rep.Repaired++
			rep.RepairedDuplicates++
		default:
			rep.Repaired++
		}
	}
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	return nil
}
