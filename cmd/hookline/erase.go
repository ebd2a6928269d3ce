package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// tenantsErase crypto-shreds a tenant's payloads. --confirm must repeat
// --id: there is no undo.
func tenantsErase(fs *flag.FlagSet) func(context.Context, *conn) error {
	id := fs.String("id", "", "tenant id")
	confirm := fs.String("confirm", "", "the tenant id again: erasure cannot be undone")
	return func(ctx context.Context, c *conn) error {
		switch {
		case *id == "":
			return errors.New("tenants erase: --id is required")
		case *confirm != *id:
			return fmt.Errorf("tenants erase: --confirm %q does not repeat --id %q; erasure cannot be undone, so give the tenant id twice", *confirm, *id)
		}
		return show(ctx, c, func(ctx context.Context, req *controlv1.EraseTenantRequest) (*controlv1.EraseTenantResponse, error) {
			return c.EraseTenant(ctx, req.GetTenantId())
		}, &controlv1.EraseTenantRequest{TenantId: *id, Confirm: *confirm}, func(w io.Writer, r *controlv1.EraseTenantResponse) {
			key := r.GetDataKeyId()
			if key == "" {
				key = "none yet: no payload of it was sealed"
			}
			fmt.Fprintf(w, "tenant %s erased at %s\ndata key destroyed: %s\nits payloads and response bodies published so far can no longer be read anywhere; its pending deliveries end failed (erased)\n",
				r.GetTenantId(), fmtTime(r.GetErasedAt()), key)
		})
	}
}

// eventsGet prints one event and its payload.
func eventsGet(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant := fs.String("tenant", "", "tenant id (admin token only)")
	id := fs.String("id", "", "event id")
	return func(ctx context.Context, c *conn) error {
		return show(ctx, c, c.GetEvent, &controlv1.GetEventRequest{TenantId: *tenant, EventId: *id}, func(w io.Writer, e *controlv1.Event) {
			fmt.Fprintf(w, "event     %s (%s)\naccepted  %s\ncontent   %s, %d bytes, sha256 %x, sealed %v\n",
				e.GetEventId(), e.GetEventType(), fmtTime(e.GetAcceptedAt()), e.GetContentType(), len(e.GetPayload()), e.GetPayloadSha256(), e.GetSealed())
			fmt.Fprintf(w, "%s\n", e.GetPayload())
		})
	}
}
