package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/projections"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/reconcile"
)

// ReconcileOffline reconciles the data directory of a stopped node on the
// embedded log: its log, and its projections brought up to the log's head
// first (as the node would on start). It owns every partition. It fails
// while a node runs on dir (the log is locked). With req.Repair it
// repairs as a live node would and, the node being stopped, may also
// rebuild the registry; due work that no grain pulls is not checked (the
// node's sweeper wakes it on start).
func ReconcileOffline(ctx context.Context, dir string, req *controlv1.ReconcileRequest, logger *slog.Logger) (*controlv1.ReconcileReport, error) {
	if logger == nil {
		logger = slog.Default()
	}
	if _, err := os.Stat(filepath.Join(dir, "log")); err != nil {
		return nil, fmt.Errorf("%s holds no embedded log (a node on a shared log is reconciled through any running node: hookline reconcile --addr): %w", dir, err)
	}
	l, err := embedded.Open(embedded.Config{Dir: filepath.Join(dir, "log"), Logger: logger})
	if err != nil {
		return nil, fmt.Errorf("open the log of %s (is a node running on it?): %w", dir, err)
	}
	defer l.Close()
	head, err := l.Head(ctx)
	if err != nil {
		return nil, err
	}
	run := reconcile.Run{
		ID: newRunID(time.Now()), Head: head, Repair: req.GetRepair(), MaxListed: int(req.GetMaxListed()), SkipReplay: req.GetSkipReplay(),
		IssuedBy: &hooklinev1.Actor{Kind: hooklinev1.Actor_KIND_ADMIN, Id: "offline"},
	}
	report := &controlv1.ReconcileReport{RunId: run.ID, StartedAt: timestamppb.Now(), HeadCommit: head.Commit, HeadPrepare: head.Prepare}

	// The stopped node's projections, owning every partition, brought up
	// to the log's head first.
	st, err := reconcile.OpenProjections(ctx, l, projections.Config{Dir: filepath.Join(dir, "projections"), Logger: logger}, events.AllPartitions(), head)
	if err != nil {
		return nil, fmt.Errorf("projections of %s: %w", dir, err)
	}
	defer st.Close()
	r, err := reconcile.New(reconcile.Config{Log: l, Node: "offline", Offline: true, Runner: st.Runner,
		Registry: st.Registry, Due: st.Due, History: st.History, Logger: logger})
	if err != nil {
		return nil, err
	}
	plans, err := r.Plans(ctx, run)
	if err != nil {
		return nil, err
	}
	all := events.AllPartitions()
	part, err := r.Part(ctx, run, all)
	if err != nil {
		return nil, err
	}
	reconcile.Merge(report, run.MaxListed, plans, part)
	report.FinishedAt = timestamppb.Now()
	return report, nil
}
