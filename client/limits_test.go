package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/client/clienttest"
)

// TestCallerLimit: the node's bound of one caller's calls in flight, as a
// client meets it.
func TestCallerLimit(t *testing.T) {
	const limit = 4
	n := clienttest.Start(t, clienttest.Options{MaxInFlightPerCaller: limit})
	key := n.Tenant(t, "acme")
	ctx := ctxFor(t)

	t.Run("a caller that keeps the limit's number of calls in flight is never refused", func(t *testing.T) {
		c := n.Client(t, key, client.Config{MaxAttempts: 1})
		var wg sync.WaitGroup
		errs := make(chan error, limit)
		for range limit {
			wg.Go(func() {
				for i := range 300 {
					if _, err := c.ListOperationalEventTypes(ctx); err != nil {
						errs <- fmt.Errorf("call %d: %w", i+1, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("%d callers of one call at a time each, limit %d: %v", limit, limit, err)
		}
	})

	t.Run("over the limit: ErrLimited, not too large; retried until a slot frees", func(t *testing.T) {
		release := holdSlots(t, n.Addr, key, limit)
		once := n.Client(t, key, client.Config{MaxAttempts: 2, BackoffBase: time.Millisecond, BackoffCap: 5 * time.Millisecond})
		_, err := once.ListOperationalEventTypes(ctx)
		if !errors.Is(err, client.ErrLimited) || errors.Is(err, client.ErrTooLarge) {
			t.Fatalf("err %v, want ErrLimited and not ErrTooLarge", err)
		}
		var e *client.Error
		if !errors.As(err, &e) || e.RetryDelay <= 0 {
			t.Fatalf("err %#v, want a *client.Error with the node's RetryDelay", err)
		}
		other := n.Client(t, n.Tenant(t, "globex"), client.Config{MaxAttempts: 1})
		if _, err := other.ListOperationalEventTypes(ctx); err != nil {
			t.Fatalf("another tenant's call: %v; want it served, its limit is its own", err)
		}
		patient := n.Client(t, key, client.Config{MaxAttempts: 20, BackoffBase: 10 * time.Millisecond, BackoffCap: 50 * time.Millisecond})
		done := make(chan error, 1)
		go func() { _, err := patient.ListOperationalEventTypes(ctx); done <- err }()
		release()
		if err := <-done; err != nil {
			t.Fatalf("a call retried while the caller's slots free up: %v", err)
		}
	})
}

// holdSlots takes n of the caller's slots with server reflection streams
// that stay open, each admitted (answered once), until release is called.
func holdSlots(t *testing.T, addr, token string, n int) (release func()) {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token))
	release = func() { cancel(); _ = cc.Close() }
	t.Cleanup(release)
	for range n {
		s, err := reflectionpb.NewServerReflectionClient(cc).ServerReflectionInfo(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("open a stream that holds a slot: %v", err)
		}
	}
	return release
}
