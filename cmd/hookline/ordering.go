package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

func endpointsOrderingKeys(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	state := fs.String("state", "blocked", "\"blocked\": keys whose head has failed; \"all\": every key with a delivery waiting")
	limit := fs.Int("limit", 0, "at most this many keys (0: 100)")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.ListOrderingKeysRequest{TenantId: *tenant, EndpointId: *id, State: *state, PageSize: int32(*limit)}
		return show(ctx, c, c.ListOrderingKeys, req, printOrderingKeys)
	}
}

// printOrderingKeys prints a line per key.
func printOrderingKeys(w io.Writer, r *controlv1.ListOrderingKeysResponse) {
	if len(r.GetKeys()) == 0 {
		fmt.Fprintln(w, "no ordering keys waiting")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSTATE\tHEAD\tWAITED\tBEHIND")
	for _, k := range r.GetKeys() {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%ds\t%d\n", k.GetOrderingKey(), k.GetState(), k.GetHeadDeliveryId(), k.GetWaitedSeconds(), k.GetWaiting())
	}
	tw.Flush()
}

func endpointsSkipKey(fs *flag.FlagSet) func(context.Context, *conn) error {
	tenant, id := endpointFlags(fs)
	key := fs.String("key", "", "the ordering key whose head to skip (required)")
	head := fs.String("head", "", "the head delivery you mean to skip (from ordering-keys): refused if the key has moved on")
	return func(ctx context.Context, c *conn) error {
		req := &controlv1.SkipOrderingKeyRequest{TenantId: *tenant, EndpointId: *id, OrderingKey: *key, HeadDeliveryId: *head}
		return show(ctx, c, c.SkipOrderingKey, req, func(w io.Writer, k *controlv1.OrderingKey) {
			fmt.Fprintf(w, "skipped %s, the head of ordering key %s; %d of its deliveries follow\n", k.GetHeadDeliveryId(), k.GetOrderingKey(), k.GetWaiting())
		})
	}
}
