package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// keysReseal is `hookline keys reseal` (admin): every live endpoint secret
// is sealed anew under the node's current master key, and the keys no
// secret is sealed under any more are retired. It is the last step of a
// master key rotation: first every node gets the new key first and the old
// one after it (HOOKLINE_MASTER_KEY="new,old") and restarts, one by one;
// then this; then the nodes may drop the old key, one by one.
func keysReseal(fs *flag.FlagSet) func(context.Context, *conn) error {
	timeout := fs.Duration("reseal-timeout", 10*time.Minute, "how long the reseal may take (it visits every live endpoint)")
	return func(ctx context.Context, c *conn) error {
		ctx, cancel := context.WithTimeout(ctx, *timeout)
		defer cancel()
		resp, err := c.ResealSecrets(ctx)
		if err != nil {
			return fmt.Errorf("keys reseal: %w", err)
		}
		if err := c.print(resp, func(w io.Writer) {
			fmt.Fprintf(w, "current key:  %s\nendpoints:    %d\nretired keys: %s\n", resp.GetCurrentKeyId(), resp.GetEndpoints(), cmp.Or(strings.Join(resp.GetRetiredKeyIds(), " "), "none"))
			for _, f := range resp.GetFailed() {
				fmt.Fprintf(w, "failed:       %s\n", f)
			}
		}); err != nil {
			return err
		}
		if n := len(resp.GetFailed()); n > 0 {
			return fmt.Errorf("keys reseal: %d endpoints did not reseal, so no key was retired; fix the cause (every node must seal under %s) and run it again", n, resp.GetCurrentKeyId())
		}
		return nil
	}
}
