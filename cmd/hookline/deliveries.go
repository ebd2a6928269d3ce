package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// timeFlag parses RFC 3339 times or durations ago ("2h" = two hours ago).
type timeFlag struct{ t *timestamppb.Timestamp }

func (f *timeFlag) String() string {
	if f.t == nil {
		return ""
	}
	return f.t.AsTime().Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	if d, err := time.ParseDuration(s); err == nil {
		f.t = timestamppb.New(time.Now().Add(-d))
		return nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return errors.New("give an RFC 3339 time (2026-11-29T10:00:00Z) or a duration ago (2h)")
	}
	f.t = timestamppb.New(t)
	return nil
}

func deliveriesList(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	endpoint := fs.String("endpoint", "", "only this endpoint")
	status := fs.String("status", "", "pending, succeeded or failed")
	typ := fs.String("type", "", "only this event type")
	var since, until timeFlag
	fs.Var(&since, "since", "planned at or after (RFC 3339, or a duration ago like 2h)")
	fs.Var(&until, "until", "planned before (RFC 3339, or a duration ago)")
	size := fs.Int("limit", 50, "page size")
	cursor := fs.String("cursor", "", "cursor from the previous page")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.ListDeliveriesRequest{
			TenantId: *tenant, EndpointId: *endpoint, Status: *status, EventType: *typ,
			Since: since.t, Until: until.t, PageSize: int32(*size), Cursor: *cursor, WithWaits: true,
		}
		return show(ctx, c, c.ListDeliveries, req, func(w io.Writer, r *controlv1.ListDeliveriesResponse) {
			if len(r.GetDeliveries()) == 0 {
				fmt.Fprintln(w, emptyPage("no deliveries", *cursor)+searched(req))
			}
			for _, d := range r.GetDeliveries() {
				fmt.Fprintf(w, "%s  %-9s attempts=%-2d last=%-7s %s  %s -> %s", d.GetDeliveryId(), d.GetStatus(), d.GetAttemptCount(),
					lastText(d), fmtTime(d.GetPlannedAt()), d.GetEventType(), d.GetEndpointId())
				if wt := d.GetWait(); wt != nil {
					fmt.Fprintf(w, "  waits: %s", waitText(wt, false))
				}
				fmt.Fprintln(w)
			}
			if r.GetNextCursor() != "" {
				fmt.Fprintf(w, "(more: --cursor %s)\n", r.GetNextCursor())
			}
		})
	}
}

// lastText says how a delivery's last attempt ended: its HTTP status, or
// for one without (a pull, a refused address, a timeout) what it was;
// "-" before any attempt.
func lastText(d *controlv1.Delivery) string {
	switch {
	case d.GetAttemptCount() == 0:
		return "-"
	case d.GetLastHttpStatus() > 0:
		return fmt.Sprint(d.GetLastHttpStatus())
	case d.GetLastPulled() && d.GetLastErrorClass() != "":
		return "pulled:" + d.GetLastErrorClass()
	case d.GetLastPulled():
		return "pulled"
	}
	return cmp.Or(d.GetLastErrorClass(), "error")
}

// waitText says what a pending delivery waits for: its reason and until
// when, with the detail sentence when long.
func waitText(w *controlv1.DeliveryWait, long bool) string {
	s := w.GetReason()
	if u := w.GetUntil(); u != nil {
		s += " until " + fmtTime(u)
	}
	if long && w.GetDetail() != "" {
		s += ": " + w.GetDetail()
	}
	return s
}

// searched names the filters of a search for deliveries: " of endpoint
// ep_1, status failed", or "" for none.
func searched(req *controlv1.ListDeliveriesRequest) string {
	var parts []string
	for _, f := range []struct{ name, value string }{
		{"tenant", req.GetTenantId()}, {"endpoint", req.GetEndpointId()}, {"status", req.GetStatus()}, {"type", req.GetEventType()},
	} {
		if f.value != "" {
			parts = append(parts, f.name+" "+f.value)
		}
	}
	if req.GetSince() != nil {
		parts = append(parts, "planned since "+fmtTime(req.GetSince()))
	}
	if req.GetUntil() != nil {
		parts = append(parts, "planned until "+fmtTime(req.GetUntil()))
	}
	if len(parts) == 0 {
		return ""
	}
	return " with " + strings.Join(parts, ", ")
}

func deliveriesGet(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "delivery id")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.GetDelivery, &controlv1.GetDeliveryRequest{TenantId: *tenant, DeliveryId: *id}, printDelivery)
	}
}

func deliveriesReplay(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "delivery id")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.ReplayDelivery, &controlv1.ReplayDeliveryRequest{TenantId: *tenant, DeliveryId: *id}, func(w io.Writer, d *controlv1.Delivery) {
			fmt.Fprintln(w, "replay requested: one manual attempt with the same webhook-id")
			printDelivery(w, d)
		})
	}
}

func printDelivery(w io.Writer, d *controlv1.Delivery) {
	fmt.Fprintf(w, "delivery   %s\nevent      %s (%s)\nendpoint   %s\nstatus     %s\nplanned    %s\n",
		d.GetDeliveryId(), d.GetEventId(), d.GetEventType(), d.GetEndpointId(), d.GetStatus(), fmtTime(d.GetPlannedAt()))
	if t := d.GetNextAttemptAt(); t != nil {
		fmt.Fprintf(w, "next       %s\n", fmtTime(t))
	}
	if wt := d.GetWait(); wt != nil {
		fmt.Fprintf(w, "waits      %s\n", waitText(wt, true))
	}
	if e := d.GetLastError(); e != "" && d.GetStatus() != "succeeded" {
		fmt.Fprintf(w, "last error %s\n", e)
	}
	printAttempts(w, d.GetAttempts())
}

func endpointsRecover(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "endpoint id")
	var since, until timeFlag
	fs.Var(&since, "since", "replay deliveries planned at or after (RFC 3339, or a duration ago like 24h); required")
	fs.Var(&until, "until", "and before (default: now; give it with --dry-run, so that the run lists the same window)")
	statuses := fs.String("status", "", "comma-separated statuses to replay: failed (the default), succeeded, pending")
	types := fs.String("types", "", "comma-separated event types to replay (default: every type)")
	dryRun := fs.Bool("dry-run", false, "only show the manifest: how many, the digest of the exact list, the time under the rate limit")
	digest := fs.String("digest", "", "the dry run's digest: replay only if the window still lists exactly that list")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.RecoverEndpoint, &controlv1.RecoverEndpointRequest{
			TenantId: *tenant, EndpointId: *id, Since: since.t, Until: until.t,
			Statuses: splitList(*statuses), EventTypes: splitList(*types), DryRun: *dryRun, Digest: *digest,
		}, printRecovery)
	}
}

func endpointsRecovery(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "endpoint id")
	rid := fs.String("recovery", "", "recovery id; empty lists the endpoint's recoveries")
	return func(ctx context.Context, c *conn) error {
		if *rid == "" {
			return show(ctx, c, c.ListRecoveries, &controlv1.ListRecoveriesRequest{TenantId: *tenant, EndpointId: *id}, printRecoveries)
		}
		return show(ctx, c, c.GetRecovery, &controlv1.GetRecoveryRequest{TenantId: *tenant, EndpointId: *id, RecoveryId: *rid}, printRecovery)
	}
}

// printRecoveries prints a line per recovery.
func printRecoveries(w io.Writer, r *controlv1.ListRecoveriesResponse) {
	rs := r.GetRecoveries()
	if len(rs) == 0 {
		fmt.Fprintln(w, "no recoveries (hookline endpoints recover starts one)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RECOVERY\tSTATE\tRANGE\tREPLAYED")
	for _, r := range rs {
		state := "running"
		if r.GetDone() {
			state = "done"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s .. %s\t%d of %d\n", r.GetRecoveryId(), state, fmtTime(r.GetSince()), fmtTime(r.GetUntil()), r.GetReplayed(), r.GetFound())
	}
	tw.Flush()
}

func printRecovery(w io.Writer, r *controlv1.Recovery) {
	state := "running"
	if r.GetDone() {
		state = "done"
	}
	if m := r.GetManifest(); m != nil {
		defer func() {
			fmt.Fprintf(w, "filter     statuses %s; event types %s\nlist       %d deliveries, digest %s\n",
				strings.Join(r.GetStatuses(), ","), cmp.Or(strings.Join(r.GetEventTypes(), ","), "all"), m.GetDeliveries(), m.GetDigest())
			fmt.Fprintf(w, "takes      %.1f s at least, at %g/s (burst %d)\n", m.GetEstimatedSeconds(), m.GetRatePerSecond(), m.GetBurst())
			for _, id := range m.GetDeliveryIds() {
				fmt.Fprintf(w, "  %s\n", id)
			}
		}()
	}
	if r.GetDryRun() {
		fmt.Fprintf(w, "dry run    nothing started\nendpoint   %s\nrange      %s .. %s\n", r.GetEndpointId(), fmtTime(r.GetSince()), fmtTime(r.GetUntil()))
		return
	}
	fmt.Fprintf(w, "recovery   %s (%s)\nendpoint   %s\nrange      %s .. %s\nprogress   %d replayed of %d found\n",
		r.GetRecoveryId(), state, r.GetEndpointId(), fmtTime(r.GetSince()), fmtTime(r.GetUntil()), r.GetReplayed(), r.GetFound())
}
