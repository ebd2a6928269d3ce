package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// errNotClean is reconcile's failure when it found discrepancies (that a
// repair did not fix): scripts and monitors act on the exit status.
var errNotClean = errors.New("reconcile: not clean")

// reconcileAbout is the paragraph of reconcile's -h text.
const reconcileAbout = `Compares every durable boundary with the log (the plans with the publishes
and the subscriptions of their time, the due index with the delivery
streams and the grains, the history with the attempts, each projection with
a replay) and prints the counts per tenant and every discrepancy with its
ids. --repair fixes what can be fixed without a second logical delivery;
each repair is an event with its reason. Exits 1 unless clean.

Against a running node give --addr and the admin token; against a stopped
node's data directory (embedded log) give --data.`

// reconcileRun is `hookline reconcile`: against a running node (--addr,
// the admin token), or against a stopped node's data directory on the
// embedded log (--data). It prints the report and fails unless clean.
func reconcileRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("reconcile")
	opts := clientFlags(fs)
	data := fs.String("data", "", "a STOPPED node's data directory (embedded log): reconcile it offline instead of asking a node")
	repair := fs.Bool("repair", false, "repair what can be repaired: re-plan from the publish's snapshot, wake stranded work, rebuild divergent projections")
	maxListed := fs.Int("max", 0, "list at most this many discrepancies (0: 1000; the counts cover all)")
	notPulled := fs.Duration("not-pulled-after", 0, "report due work an endpoint's grain has not pulled for this long (0: the node's default, 1m)")
	skipReplay := fs.Bool("skip-replay", false, "skip the comparison of projections with a replay of the log (the costliest check)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *maxListed < 0 || *notPulled < 0 {
		return errors.New("reconcile: --max or --not-pulled-after is negative; give 0 (the default) or more")
	}
	req := &controlv1.ReconcileRequest{Repair: *repair, MaxListed: int32(*maxListed), NotPulledAfterMs: notPulled.Milliseconds(), SkipReplay: *skipReplay}
	// A run reads the whole log: --timeout (30 s by default for the other
	// commands) is raised to half an hour unless it was given.
	timeout := opts.timeout
	if !flagGiven(fs, "timeout") {
		timeout = 30 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	var rep *controlv1.ReconcileReport
	var err error
	if *data != "" {
		logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		rep, err = node.ReconcileOffline(ctx, *data, req, logger)
	} else {
		rep, err = reconcileNode(ctx, opts, req)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := protojson.MarshalOptions{UseProtoNames: true, Multiline: true}.Marshal(rep)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		printReconcileReport(stdout, rep)
	}
	if !rep.GetClean() && rep.GetRepaired() < rep.GetDiscrepanciesTotal() {
		return fmt.Errorf("%w: %d discrepancies, %d repaired", errNotClean, rep.GetDiscrepanciesTotal(), rep.GetRepaired())
	}
	if !rep.GetClean() && rep.GetDiscrepanciesTotal() == 0 {
		return fmt.Errorf("%w: %s", errNotClean, strings.Join(rep.GetNotes(), "; "))
	}
	return nil
}

// reconcileNode asks a running node.
func reconcileNode(ctx context.Context, opts *clientOptions, req *controlv1.ReconcileRequest) (*controlv1.ReconcileReport, error) {
	c, err := opts.connect()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rep, err := c.Reconcile(ctx, req)
	return rep, noNode(err, opts.addr)
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// printReconcileReport writes a report for people: the verdict, the counts per
// tenant and per check, the projections' digests, every discrepancy
// listed, the notes.
func printReconcileReport(w io.Writer, rep *controlv1.ReconcileReport) {
	verdict := "CLEAN"
	if !rep.GetClean() {
		verdict = fmt.Sprintf("NOT CLEAN: %d discrepancies, %d repaired", rep.GetDiscrepanciesTotal(), rep.GetRepaired())
	}
	took := rep.GetFinishedAt().AsTime().Sub(rep.GetStartedAt().AsTime()).Round(time.Millisecond)
	fmt.Fprintf(w, "reconcile %s  log head %d  %s  (%s)\n\n", rep.GetRunId(), rep.GetHeadCommit(), verdict, took)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "tenant\tevents\tplanned\tfiltered\tsucceeded\tfailed\tpending\tdue\theld\tdiscrepancies")
	for _, t := range rep.GetTenants() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", t.GetTenantId(), t.GetEvents(), t.GetPlanned(), t.GetFiltered(), t.GetSucceeded(),
			t.GetFailed(), t.GetPending(), t.GetDue(), t.GetHeld(), t.GetDiscrepancies())
	}
	fmt.Fprintln(tw, "\ncheck\texamined\tdiscrepancies\trepaired")
	for _, c := range rep.GetChecks() {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\n", c.GetName(), c.GetExamined(), c.GetDiscrepancies(), c.GetRepaired())
	}
	if len(rep.GetProjections()) > 0 {
		fmt.Fprintln(tw, "\nprojection\tnode\tentries (node / replay)\tdigest (node / replay)\tdiffering\tmoving")
		for _, p := range rep.GetProjections() {
			fmt.Fprintf(tw, "%s\t%s\t%d / %d\t%s / %s\t%d\t%d\n", p.GetName(), p.GetNode(), p.GetNodeEntries(), p.GetReplayEntries(),
				p.GetNodeDigest(), p.GetReplayDigest(), p.GetDiffering(), p.GetMoving())
		}
	}
	tw.Flush()
	if len(rep.GetDiscrepancies()) > 0 {
		fmt.Fprintf(w, "\ndiscrepancies (%d listed of %d):\n", len(rep.GetDiscrepancies()), rep.GetDiscrepanciesTotal())
		for _, d := range rep.GetDiscrepancies() {
			fmt.Fprintf(w, "- %s [%s]", d.GetKind(), d.GetCheck())
			for _, kv := range [][2]string{{"tenant", d.GetTenantId()}, {"event", d.GetEventId()}, {"endpoint", d.GetEndpointId()}, {"node", d.GetNode()}} {
				if kv[1] != "" {
					fmt.Fprintf(w, " %s=%s", kv[0], kv[1])
				}
			}
			fmt.Fprintf(w, "\n    %s\n", d.GetDetail())
			if ids := d.GetDeliveryIds(); len(ids) > 0 {
				fmt.Fprintf(w, "    ids: %s\n", strings.Join(ids, " "))
			}
			state := "repair: " + d.GetRepair()
			if d.GetRepaired() {
				state = "REPAIRED: " + d.GetRepair()
			}
			fmt.Fprintf(w, "    %s\n", state)
		}
	}
	for _, n := range rep.GetNotes() {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}
