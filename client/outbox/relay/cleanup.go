package relay

import (
	"context"
	"fmt"
	"log/slog"
)

// cleanupChunk bounds the rows one DELETE removes, so that the cleanup's
// transactions stay short.
const cleanupChunk = 5000

// cleanupLoop runs Cleanup every CleanupEvery.
func (w *Worker) cleanupLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := w.Cleanup(ctx); err != nil && ctx.Err() == nil {
			w.cfg.Logger.Warn("relay cleanup failed; it runs again later", slog.String("error", err.Error()))
		}
		sleep(ctx, w.cfg.CleanupEvery)
	}
}

// Cleanup deletes the relayed rows created more than Retention ago, in
// chunks, and returns how many it deleted. Waiting and refused rows are
// never deleted. Several Workers may clean at once: each chunk skips the
// rows another one holds. With a negative Retention it deletes nothing.
func (w *Worker) Cleanup(ctx context.Context) (int64, error) {
	if w.cfg.Retention < 0 {
		return 0, nil
	}
	var total int64
	for {
		tag, err := w.cfg.DB.Exec(ctx, `DELETE FROM `+w.table+` WHERE seq IN (
			SELECT seq FROM `+w.table+` WHERE created_at < clock_timestamp() - $1::interval AND relayed_at IS NOT NULL
			ORDER BY created_at LIMIT $2 FOR UPDATE SKIP LOCKED)`, w.cfg.Retention, cleanupChunk)
		if err != nil {
			return total, fmt.Errorf("delete relayed rows: %w", err)
		}
		n := tag.RowsAffected()
		total += n
		w.stats.deleted.Add(n)
		w.m.deleted.Add(float64(n))
		if n < cleanupChunk {
			return total, nil
		}
	}
}
