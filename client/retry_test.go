package client_test

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/hookline/hookline/client"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// fakeNode is a gRPC server on loopback that answers as a test says: the
// far side of the process boundary, for failures a real node does not
// produce on demand (lost answers, UNAVAILABLE, oversized requests).
type fakeNode struct {
	controlv1.UnimplementedEventServiceServer
	controlv1.UnimplementedTenantServiceServer

	addr string
	// answer decides each call: nil lets the call succeed. n counts the
	// calls of the method so far, this one included.
	answer func(ctx context.Context, method string, n int, req any) error

	mu    sync.Mutex // guards calls and auth
	calls map[string]int
	auth  []string
}

func startFake(t *testing.T, answer func(ctx context.Context, method string, n int, req any) error, creds ...credentials.TransportCredentials) *fakeNode {
	t.Helper()
	f := &fakeNode{answer: answer, calls: map[string]int{}}
	var opts []grpc.ServerOption
	if len(creds) > 0 {
		opts = append(opts, grpc.Creds(creds[0]))
	}
	g := grpc.NewServer(opts...)
	controlv1.RegisterEventServiceServer(g, f)
	controlv1.RegisterTenantServiceServer(g, f)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = lis.Addr().String()
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return f
}

func (f *fakeNode) call(ctx context.Context, method string, req any) error {
	f.mu.Lock()
	f.calls[method]++
	n := f.calls[method]
	md, _ := metadata.FromIncomingContext(ctx)
	f.auth = append(f.auth, md.Get("authorization")...)
	f.mu.Unlock()
	if f.answer == nil {
		return nil
	}
	return f.answer(ctx, method, n, req)
}

func (f *fakeNode) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fakeNode) Publish(ctx context.Context, req *controlv1.PublishRequest) (*controlv1.PublishResponse, error) {
	if err := f.call(ctx, "Publish", req); err != nil {
		return nil, err
	}
	return &controlv1.PublishResponse{EventId: req.GetEventId()}, nil
}

func (f *fakeNode) PublishBatch(ctx context.Context, req *controlv1.PublishBatchRequest) (*controlv1.PublishBatchResponse, error) {
	if err := f.call(ctx, "PublishBatch", req); err != nil {
		return nil, err
	}
	out := &controlv1.PublishBatchResponse{}
	for _, ev := range req.GetEvents() {
		out.Results = append(out.Results, &controlv1.PublishResult{Response: &controlv1.PublishResponse{EventId: ev.GetEventId()}})
	}
	return out, nil
}

func (f *fakeNode) IssueApiKey(ctx context.Context, req *controlv1.IssueApiKeyRequest) (*controlv1.IssueApiKeyResponse, error) {
	if err := f.call(ctx, "IssueApiKey", req); err != nil {
		return nil, err
	}
	return &controlv1.IssueApiKeyResponse{TenantId: req.GetTenantId(), ApiKey: "hk_x"}, nil
}

func (f *fakeNode) GetTenant(ctx context.Context, req *controlv1.GetTenantRequest) (*controlv1.Tenant, error) {
	if err := f.call(ctx, "GetTenant", req); err != nil {
		return nil, err
	}
	return &controlv1.Tenant{TenantId: req.GetTenantId()}, nil
}

// fastRetries keeps the waits between attempts short.
func fastRetries(addr string) client.Config {
	return client.Config{Addr: addr, Token: "hk_secret", BackoffBase: time.Millisecond, BackoffCap: 5 * time.Millisecond}
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRetries(t *testing.T) {
	ev := client.Event{ID: "e1", Type: "a.b", Payload: []byte(`{}`)}
	unavailable := status.Error(codes.Unavailable, "node restarting")

	t.Run("publish is retried on UNAVAILABLE", func(t *testing.T) {
		f := startFake(t, func(_ context.Context, _ string, n int, _ any) error {
			if n <= 2 {
				return unavailable
			}
			return nil
		})
		if _, err := newClient(t, fastRetries(f.addr)).Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		if got := f.count("Publish"); got != 3 {
			t.Fatalf("%d attempts, want 3", got)
		}
	})
	t.Run("publish is retried when the answer is lost", func(t *testing.T) {
		f := startFake(t, func(ctx context.Context, _ string, n int, _ any) error {
			if n == 1 { // processed, but the answer never comes back in time
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		})
		cfg := fastRetries(f.addr)
		cfg.AttemptTimeout = 200 * time.Millisecond
		if _, err := newClient(t, cfg).Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		if got := f.count("Publish"); got != 2 {
			t.Fatalf("%d attempts, want 2", got)
		}
	})
	t.Run("at most MaxAttempts", func(t *testing.T) {
		f := startFake(t, func(context.Context, string, int, any) error { return unavailable })
		cfg := fastRetries(f.addr)
		cfg.MaxAttempts = 3
		_, err := newClient(t, cfg).Publish(t.Context(), ev)
		if !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("err %v, want ErrUnavailable", err)
		}
		if got := f.count("Publish"); got != 3 {
			t.Fatalf("%d attempts, want 3", got)
		}
	})
	t.Run("a refusal is not retried", func(t *testing.T) {
		f := startFake(t, func(context.Context, string, int, any) error {
			return status.Error(codes.InvalidArgument, "type: is required")
		})
		_, err := newClient(t, fastRetries(f.addr)).Publish(t.Context(), ev)
		if !errors.Is(err, client.ErrInvalid) || f.count("Publish") != 1 {
			t.Fatalf("err %v after %d attempts, want ErrInvalid after 1", err, f.count("Publish"))
		}
	})
	t.Run("a call that is not idempotent is sent once", func(t *testing.T) {
		f := startFake(t, func(context.Context, string, int, any) error { return unavailable })
		_, err := newClient(t, fastRetries(f.addr)).IssueAPIKey(t.Context(), &controlv1.IssueApiKeyRequest{TenantId: "acme"})
		if !errors.Is(err, client.ErrUnavailable) || f.count("IssueApiKey") != 1 {
			t.Fatalf("err %v after %d attempts, want ErrUnavailable after 1", err, f.count("IssueApiKey"))
		}
	})
	t.Run("reads are retried", func(t *testing.T) {
		f := startFake(t, func(_ context.Context, _ string, n int, _ any) error {
			if n == 1 {
				return status.Error(codes.Aborted, "a concurrent change won; retry the request")
			}
			return nil
		})
		if _, err := newClient(t, fastRetries(f.addr)).GetTenant(t.Context(), &controlv1.GetTenantRequest{TenantId: "acme"}); err != nil {
			t.Fatal(err)
		}
		if got := f.count("GetTenant"); got != 2 {
			t.Fatalf("%d attempts, want 2", got)
		}
	})
	t.Run("the caller's deadline ends the retries", func(t *testing.T) {
		f := startFake(t, func(ctx context.Context, _ string, _ int, _ any) error {
			<-ctx.Done()
			return ctx.Err()
		})
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := newClient(t, fastRetries(f.addr)).Publish(ctx, ev)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want context.DeadlineExceeded", err)
		}
		if f.count("Publish") != 1 || time.Since(start) > 10*time.Second {
			t.Fatalf("%d attempts in %v, want 1 ending at the caller's deadline", f.count("Publish"), time.Since(start))
		}
	})
	t.Run("the caller's deadline during a backoff", func(t *testing.T) {
		f := startFake(t, func(context.Context, string, int, any) error { return unavailable })
		cfg := fastRetries(f.addr)
		cfg.BackoffBase, cfg.BackoffCap = 10*time.Second, 10*time.Second
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		_, err := newClient(t, cfg).Publish(ctx, ev)
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "node restarting") {
			t.Fatalf("err %v, want context.DeadlineExceeded with the last attempt's reason", err)
		}
	})
	t.Run("an oversized batch is split", func(t *testing.T) {
		f := startFake(t, func(_ context.Context, method string, _ int, req any) error {
			if r, ok := req.(*controlv1.PublishBatchRequest); ok && len(r.GetEvents()) > 2 {
				return status.Error(codes.ResourceExhausted, "grpc: received message larger than max")
			}
			return nil
		})
		evs := make([]client.Event, 7)
		for i := range evs {
			evs[i] = client.Event{ID: string(rune('a' + i)), Type: "a.b", Payload: []byte(`{}`)}
		}
		res, err := newClient(t, fastRetries(f.addr)).PublishBatch(t.Context(), evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Response.GetEventId() != evs[i].ID {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
	})
	t.Run("a limit's refusal is retried and never splits a batch", func(t *testing.T) {
		var sizes []int
		var mu sync.Mutex
		f := startFake(t, func(_ context.Context, _ string, n int, req any) error {
			mu.Lock()
			sizes = append(sizes, len(req.(*controlv1.PublishBatchRequest).GetEvents()))
			mu.Unlock()
			if n <= 2 {
				return limited(t)
			}
			return nil
		})
		evs := make([]client.Event, 7)
		for i := range evs {
			evs[i] = client.Event{ID: string(rune('a' + i)), Type: "a.b", Payload: []byte(`{}`)}
		}
		res, err := newClient(t, fastRetries(f.addr)).PublishBatch(t.Context(), evs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || r.Response.GetEventId() != evs[i].ID {
				t.Fatalf("result %d: %+v", i, r)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(sizes, []int{7, 7, 7}) {
			t.Fatalf("requests of %v events, want the whole batch three times", sizes)
		}
	})
	t.Run("a limit's refusal after the retries stops the batch, as ErrLimited", func(t *testing.T) {
		f := startFake(t, func(context.Context, string, int, any) error { return limited(t) })
		cfg := fastRetries(f.addr)
		cfg.MaxAttempts = 3
		evs := []client.Event{ev, {ID: "e2", Type: "a.b", Payload: []byte(`{}`)}}
		res, err := newClient(t, cfg).PublishBatch(t.Context(), evs)
		if !errors.Is(err, client.ErrLimited) || errors.Is(err, client.ErrTooLarge) {
			t.Fatalf("err %v, want ErrLimited and not ErrTooLarge", err)
		}
		for i, r := range res {
			if !errors.Is(r.Err, client.ErrLimited) {
				t.Fatalf("result %d: %v, want ErrLimited (the row waits, it is not refused)", i, r.Err)
			}
		}
		if got := f.count("PublishBatch"); got != 3 {
			t.Fatalf("%d requests, want 3 (MaxAttempts, no split)", got)
		}
	})
	t.Run("a call that is not idempotent is sent again after a limit's refusal", func(t *testing.T) {
		f := startFake(t, func(_ context.Context, _ string, n int, _ any) error {
			if n == 1 {
				return limited(t) // refused before anything was done
			}
			return nil
		})
		if _, err := newClient(t, fastRetries(f.addr)).IssueAPIKey(t.Context(), &controlv1.IssueApiKeyRequest{TenantId: "acme"}); err != nil {
			t.Fatal(err)
		}
		if got := f.count("IssueApiKey"); got != 2 {
			t.Fatalf("%d attempts, want 2", got)
		}
	})
	t.Run("the token is a bearer token on every attempt", func(t *testing.T) {
		f := startFake(t, func(_ context.Context, _ string, n int, _ any) error {
			if n == 1 {
				return unavailable
			}
			return nil
		})
		if _, err := newClient(t, fastRetries(f.addr)).Publish(t.Context(), ev); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if len(f.auth) != 2 || f.auth[0] != "Bearer hk_secret" || f.auth[1] != "Bearer hk_secret" {
			t.Fatalf("authorization headers %q", f.auth)
		}
	})
}

// limited is a node's refusal of a call over its caller's limit of calls
// in flight, as the control API sends it: RESOURCE_EXHAUSTED with a
// RetryInfo.
func limited(t *testing.T) error {
	st, err := status.New(codes.ResourceExhausted, "this caller has 64 calls in flight, its limit").
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}
