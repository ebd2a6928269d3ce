package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

func endpointsPull(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	n := fs.Int("max", 10, "deliveries to lease, 1 to 100")
	lease := fs.Duration("lease", 30*time.Second, "how long the consumer holds them before they are offered again")
	wait := fs.Duration("wait", 0, "wait this long (at most 20s) when nothing is due")
	ack := fs.Bool("ack", false, "acknowledge them at once (a consumer that only prints)")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.PullDeliveriesRequest{TenantId: *tenant, EndpointId: *id, Max: int32(*n),
			LeaseSeconds: int32(lease.Seconds()), WaitSeconds: int32(wait.Seconds())}
		cctx, cancel := c.ctx(ctx)
		defer cancel()
		res, err := c.Pull(cctx, req)
		if err != nil {
			return err
		}
		if err := c.print(res, func(w io.Writer) { printPulled(w, res) }); err != nil {
			return err
		}
		if !*ack || len(res.GetMessages()) == 0 {
			return nil
		}
		ids := make([]string, 0, len(res.GetMessages()))
		for _, m := range res.GetMessages() {
			ids = append(ids, m.GetDeliveryId())
		}
		_, err = c.Ack(cctx, &controlv1.AckDeliveriesRequest{TenantId: *tenant, EndpointId: *id, DeliveryIds: ids})
		return err
	}
}

// printPulled prints a line per leased delivery.
func printPulled(w io.Writer, r *controlv1.PullDeliveriesResponse) {
	if len(r.GetMessages()) == 0 {
		fmt.Fprintln(w, "no deliveries due")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DELIVERY\tEVENT\tTYPE\tBYTES\tLEASE UNTIL")
	for _, m := range r.GetMessages() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", m.GetDeliveryId(), m.GetEventId(), m.GetType(), len(m.GetBody()), fmtTime(m.GetLeaseExpiresAt()))
	}
	tw.Flush()
}
