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
	"github.com/hookline/hookline/projections/due"
	"github.com/hookline/hookline/projections/history"
	"github.com/hookline/hookline/projections/registry"
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

	st, err := openStore(ctx, l, dir, head, logger)
	if err != nil {
		return nil, err
	}
	defer func() { st.close() }()
	r, err := reconcile.New(reconcile.Config{Log: l, Node: "offline", Offline: true, Runner: st.runner,
		Registry: st.registry, Due: st.due, History: st.history, Logger: logger})
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

// store is a stopped node's projections, running over its log.
type store struct {
	runner   *projections.Runner
	registry *registry.Registry
	due      *due.Due
	history  *history.History
	stop     context.CancelFunc
	done     chan error
}

// openStore opens the projections of dir, owning every partition, and
// applies the log to them up to head.
func openStore(ctx context.Context, l events.Log, dir string, head events.Position, logger *slog.Logger) (_ *store, err error) {
	runner, err := projections.Open(l, projections.Config{Dir: filepath.Join(dir, "projections"), Logger: logger})
	if err != nil {
		return nil, err
	}
	st := &store{runner: runner, done: make(chan error, 1)}
	defer func() {
		if err != nil {
			st.close()
		}
	}()
	if st.registry, err = registry.New(runner); err != nil {
		return nil, err
	}
	if st.due, err = due.New(runner, due.Config{Logger: logger}); err != nil {
		return nil, err
	}
	if st.history, err = history.New(runner, history.Config{Log: l, Logger: logger}); err != nil {
		return nil, err
	}
	all := events.AllPartitions()
	runner.Own(all)
	rctx, cancel := context.WithCancel(context.Background())
	st.stop = cancel
	go func() { st.done <- runner.Run(rctx) }()
	if err := runner.WaitForPartitions(ctx, all, head); err != nil {
		return nil, fmt.Errorf("bring the projections of %s up to the log: %w", dir, err)
	}
	return st, nil
}

func (st *store) close() {
	if st.stop != nil {
		st.stop()
		<-st.done
	}
	_ = st.runner.Close()
}
