package main

import (
	"context"
	"flag"
	"fmt"
	"io"
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
		return fmt.Errorf("give an RFC 3339 time (2026-11-29T10:00:00Z) or a duration ago (2h)")
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
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.ListDeliveries(ctx, &controlv1.ListDeliveriesRequest{
			TenantId: *tenant, EndpointId: *endpoint, Status: *status, EventType: *typ,
			Since: since.t, Until: until.t, PageSize: int32(*size), Cursor: *cursor,
		})
		if err != nil {
			return err
		}
		return c.print(r, func(w io.Writer) {
			for _, d := range r.GetDeliveries() {
				fmt.Fprintf(w, "%s  %-9s attempts=%-2d last=%-3d %s  %s -> %s\n", d.GetDeliveryId(), d.GetStatus(), d.GetAttemptCount(),
					d.GetLastHttpStatus(), fmtTime(d.GetPlannedAt()), d.GetEventType(), d.GetEndpointId())
			}
			if r.GetNextCursor() != "" {
				fmt.Fprintf(w, "(more: --cursor %s)\n", r.GetNextCursor())
			}
		})
	}
}

func deliveriesGet(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "delivery id")
	return func(ctx context.Context, c *conn) error {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		d, err := c.GetDelivery(ctx, &controlv1.GetDeliveryRequest{TenantId: *tenant, DeliveryId: *id})
		if err != nil {
			return err
		}
		return c.print(d, func(w io.Writer) { printDelivery(w, d) })
	}
}

func deliveriesReplay(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "delivery id")
	return func(ctx context.Context, c *conn) error {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		d, err := c.ReplayDelivery(ctx, &controlv1.ReplayDeliveryRequest{TenantId: *tenant, DeliveryId: *id})
		if err != nil {
			return err
		}
		return c.print(d, func(w io.Writer) {
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
	printAttempts(w, d.GetAttempts())
}

func endpointsRecover(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "endpoint id")
	var since, until timeFlag
	fs.Var(&since, "since", "replay failed deliveries planned at or after (RFC 3339, or a duration ago like 24h); required")
	fs.Var(&until, "until", "and before (default: now)")
	return func(ctx context.Context, c *conn) error {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.RecoverEndpoint(ctx, &controlv1.RecoverEndpointRequest{TenantId: *tenant, EndpointId: *id, Since: since.t, Until: until.t})
		if err != nil {
			return err
		}
		return c.print(r, func(w io.Writer) { printRecovery(w, r) })
	}
}

func endpointsRecovery(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "endpoint id")
	rid := fs.String("recovery", "", "recovery id")
	return func(ctx context.Context, c *conn) error {
		ctx, cancel := c.ctx(ctx)
		defer cancel()
		r, err := c.GetRecovery(ctx, &controlv1.GetRecoveryRequest{TenantId: *tenant, EndpointId: *id, RecoveryId: *rid})
		if err != nil {
			return err
		}
		return c.print(r, func(w io.Writer) { printRecovery(w, r) })
	}
}

func printRecovery(w io.Writer, r *controlv1.Recovery) {
	state := "running"
	if r.GetDone() {
		state = "done"
	}
	fmt.Fprintf(w, "recovery   %s (%s)\nendpoint   %s\nrange      %s .. %s\nprogress   %d replayed of %d found\n",
		r.GetRecoveryId(), state, r.GetEndpointId(), fmtTime(r.GetSince()), fmtTime(r.GetUntil()), r.GetReplayed(), r.GetFound())
}
