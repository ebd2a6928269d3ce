package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/cluster"
	"github.com/hookline/hookline/control"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/projections"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/reconcile"
)

// ErrReconcileRunning refuses a reconcile while another runs on the node:
// each reads the whole log.
var ErrReconcileRunning = fmt.Errorf("%w on this node; wait for it", control.ErrReconcileBusy)

// DefaultReconcileTimeout bounds a member's part of a reconcile when the
// caller gives no deadline.
const DefaultReconcileTimeout = 30 * time.Minute

// reconciles runs reconcile on the cluster: the plans here, and every
// member's partitions on that member (this node's directly, the others
// through their reconcile actors), merged into one report. It is safe for
// concurrent use; one run at a time per node.
type reconciles struct {
	node   *cluster.Node
	log    events.Log
	r      *reconcile.Reconciler
	runner *projections.Runner
	kind   string // the partitioned kind: its members own partitions
	logger *slog.Logger
	now    func() time.Time

	running sync.Mutex // held by the run in progress (TryLock)
	parts   sync.Mutex // held by the part in progress on this node
	last    lastRun
}

// lastRun is what the metrics show of the last run driven here.
type lastRun struct {
	mu            sync.Mutex // guards the fields below
	at            time.Time
	discrepancies int64
	repaired      int64
	clean         bool
}

// served is the set of partitions this node reconciles: those live here.
func (rc *reconciles) served() events.PartitionSet {
	s := rc.runner.Live()
	s.Remove(events.NoPartition)
	return s
}

// Reconcile runs one reconcile over the cluster and returns its report.
func (rc *reconciles) Reconcile(ctx context.Context, req *controlv1.ReconcileRequest, issuedBy *hooklinev1.Actor) (*controlv1.ReconcileReport, error) {
	if !rc.running.TryLock() {
		return nil, ErrReconcileRunning
	}
	defer rc.running.Unlock()
	head, err := rc.log.Head(ctx)
	if err != nil {
		return nil, fmt.Errorf("reconcile: read the log's head: %w", err)
	}
	run := reconcile.Run{
		ID: newRunID(rc.now()), Head: head, Repair: req.GetRepair(), MaxListed: int(req.GetMaxListed()),
		NotPulledAfter: time.Duration(req.GetNotPulledAfterMs()) * time.Millisecond, SkipReplay: req.GetSkipReplay(), IssuedBy: issuedBy,
	}
	report := &controlv1.ReconcileReport{RunId: run.ID, StartedAt: timestamppb.New(rc.now()), HeadCommit: head.Commit, HeadPrepare: head.Prepare}
	rc.logger.Info("reconcile started", slog.String("run_id", run.ID), slog.String("head", head.String()), slog.Bool("repair", run.Repair))

	members := rc.members()
	parts := make([]*internalv1.ReconcilePartDone, len(members)+1)
	var wg sync.WaitGroup
	wg.Go(func() {
		p, err := rc.r.Plans(ctx, run)
		if err != nil {
			p = &internalv1.ReconcilePartDone{Node: rc.node.Address(), Error: "plans: " + err.Error()}
		}
		parts[0] = p
	})
	for i, addr := range members {
		wg.Go(func() {
			var p *internalv1.ReconcilePartDone
			if addr == rc.node.Address() {
				p = rc.part(ctx, run.Part())
			} else {
				p = rc.ask(ctx, addr, run.Part())
			}
			parts[i+1] = p
		})
	}
	wg.Wait()
	reconcile.Merge(report, run.MaxListed, parts...)
	report.FinishedAt = timestamppb.New(rc.now())
	rc.last.mu.Lock()
	rc.last.at, rc.last.discrepancies, rc.last.repaired, rc.last.clean = rc.now(), report.GetDiscrepanciesTotal(), report.GetRepaired(), report.GetClean()
	rc.last.mu.Unlock()
	rc.logger.Info("reconcile finished", slog.String("run_id", run.ID), slog.Bool("clean", report.GetClean()),
		slog.Int64("discrepancies", report.GetDiscrepanciesTotal()), slog.Int64("repaired", report.GetRepaired()),
		slog.Duration("took", report.GetFinishedAt().AsTime().Sub(report.GetStartedAt().AsTime())))
	return report, nil
}

// part reconciles this node's partitions; an error is the part's message.
func (rc *reconciles) part(ctx context.Context, m *internalv1.ReconcilePart) *internalv1.ReconcilePartDone {
	rc.parts.Lock()
	defer rc.parts.Unlock()
	p, err := rc.r.Part(ctx, reconcile.RunOf(m), rc.served())
	if err != nil {
		return &internalv1.ReconcilePartDone{Node: rc.node.Address(), Error: err.Error()}
	}
	return p
}

// ask sends a part to the reconcile service of the member at addr and
// waits for its answer, until ctx's deadline (DefaultReconcileTimeout
// without one).
func (rc *reconciles) ask(ctx context.Context, addr string, m *internalv1.ReconcilePart) *internalv1.ReconcilePartDone {
	p, err := ask[*internalv1.ReconcilePartDone](ctx, rc.node, addr, reconcileService, m, DefaultReconcileTimeout)
	if err != nil {
		return &internalv1.ReconcilePartDone{Node: addr, Error: err.Error()}
	}
	return p
}

// members returns the addresses of the members that own partitions.
func (rc *reconciles) members() []string { return rc.node.Hosting(rc.kind) }

// serve reconciles this node's partitions for a run another member leads.
func (rc *reconciles) serve(ctx context.Context, msg proto.Message) proto.Message {
	if m, ok := msg.(*internalv1.ReconcilePart); ok {
		return rc.part(ctx, m)
	}
	return nil
}

// newRunID names a run: its time and a random suffix.
func newRunID(now time.Time) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "rc_" + now.UTC().Format("20060102T150405") + "_" + hex.EncodeToString(b)
}

// wake sends a Wake to an endpoint's grain, for reconcile's repairs: not
// through the waker (a hint that may be dropped) but as a request that is
// answered.
func wake(n *cluster.Node) func(ctx context.Context, endpointID string) error {
	return func(ctx context.Context, endpointID string) error {
		_, err := n.Request(ctx, endpoint.Kind, endpointID, &internalv1.EndpointCommand{Command: &internalv1.EndpointCommand_Wake{Wake: &internalv1.Wake{}}})
		return err
	}
}

// startReconcile makes the node's reconciler, its actor and its background
// checks.
func (s *Server) startReconcile() error {
	r, err := reconcile.New(reconcile.Config{
		Log: s.log, Node: s.node.Address(), Payloads: s.payloads, LogRetention: s.cfg.Retention, Archive: s.reconcileArchive(), Runner: s.runner, Registry: s.registry, Due: s.due, History: s.history,
		Pulls: s.pulls, Wake: wake(s.node), NotPulledAfter: s.cfg.NotPulledAfter, Now: s.cfg.Now, Logger: s.logger,
	})
	if err != nil {
		return err
	}
	s.recon = &reconciles{node: s.node, log: s.log, r: r, runner: s.runner, kind: endpoint.Kind, logger: s.logger, now: s.cfg.Now}
	if s.cfg.ReconcileEvery >= 0 {
		s.backdrop = r.Background(s.cfg.ReconcileEvery)
		// One member follows the plans (every publish's records): the
		// owner of partition 1, or any member while it has none.
		s.backdrop.PlansHere(func() bool {
			o := s.node.PartitionOwner(1)
			return o == "" || o == s.node.Address()
		})
	}
	s.metrics.reconcileGauges(s)
	return s.node.Serve(reconcileService, DefaultReconcileTimeout, s.recon.serve)
}

// reconcileArchive is the archive for the reconciler, a nil interface
// without one.
func (s *Server) reconcileArchive() reconcile.StreamArchive {
	if s.archive == nil {
		return nil
	}
	return s.archive
}
