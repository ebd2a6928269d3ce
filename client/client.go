package client

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// Client calls one Hookline node's control API. It is safe for concurrent
// use; one Client (one connection, multiplexed) serves a whole process.
// Create it with New and Close it when done; the zero value is not usable.
type Client struct {
	cfg        Config
	cc         *grpc.ClientConn
	tenants    controlv1.TenantServiceClient
	endpoints  controlv1.EndpointServiceClient
	events     controlv1.EventServiceClient
	eventTypes controlv1.EventTypeServiceClient
	deliveries controlv1.DeliveryServiceClient
}

// New returns a Client for cfg.Addr. It does not connect: the connection
// is made at the first call, and made again whenever it is lost.
func New(cfg Config) (*Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.withDefaults()
	creds, err := cfg.credentials()
	if err != nil {
		return nil, err
	}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect within seconds of a node's return: gRPC's default
		// backoff grows to two minutes, which a relay would wait out.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 200 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
			MinConnectTimeout: 5 * time.Second,
		}),
	}, cfg.DialOptions...)
	cc, err := grpc.NewClient(cfg.Addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("client: %s: %w", cfg.Addr, err)
	}
	return &Client{
		cfg:        cfg,
		cc:         cc,
		tenants:    controlv1.NewTenantServiceClient(cc),
		endpoints:  controlv1.NewEndpointServiceClient(cc),
		events:     controlv1.NewEventServiceClient(cc),
		eventTypes: controlv1.NewEventTypeServiceClient(cc),
		deliveries: controlv1.NewDeliveryServiceClient(cc),
	}, nil
}

// Close closes the connection; calls after Close fail.
func (c *Client) Close() error { return c.cc.Close() }

// Addr returns the address the Client calls.
func (c *Client) Addr() string { return c.cfg.Addr }

// retry says whether a call may be sent again when its outcome is unknown.
type retry bool

const (
	// idempotent calls are retried: doing one twice does it once.
	idempotent retry = true
	// once calls are sent once: doing one twice would do it twice.
	once retry = false
)

// call runs one RPC: each attempt under Config.AttemptTimeout and with the
// token, retried as the package documentation says when r is idempotent.
func call[Req, Resp any](ctx context.Context, c *Client, op string, r retry, req Req, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	var zero Resp
	for attempt := 1; ; attempt++ {
		resp, err := attemptOf(ctx, c, req, rpc)
		if err == nil {
			return resp, nil
		}
		// A refusal for a limit did nothing: any call may be sent again,
		// after at least the wait the node advised.
		advised, over := limited(err)
		if (r == once && !over) || attempt >= c.cfg.MaxAttempts || !(over && ctx.Err() == nil || retryable(ctx, err)) {
			return zero, errorOf(op, err)
		}
		wait := max(c.backoff(attempt), advised)
		c.cfg.Logger.Debug("retrying call", slog.String("op", op), slog.Int("attempt", attempt),
			slog.String("code", status.Code(err).String()), slog.Duration("wait", wait))
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			// The caller's deadline ended the retries: say so, and why
			// the last attempt failed.
			t.Stop()
			last := status.Convert(err)
			return zero, &Error{Op: op, Code: status.FromContextError(ctx.Err()).Code(),
				Message: fmt.Sprintf("%v after %d attempts; the last: %s: %s", ctx.Err(), attempt, words(last.Code().String()), last.Message())}
		case <-t.C:
		}
	}
}

// attemptOf sends req once, under the attempt's deadline, with the token.
func attemptOf[Req, Resp any](ctx context.Context, c *Client, req Req, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.AttemptTimeout)
	defer cancel()
	return sent(ctx, c, req, rpc)
}

// sent sends req once with the token, under ctx alone.
func sent[Req, Resp any](ctx context.Context, c *Client, req Req, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	if c.cfg.Token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.cfg.Token)
	}
	return rpc(ctx, req)
}

// longCall runs an RPC that takes as long as the data it walks (a reseal,
// a reconciliation): sent once, bounded by the caller's context alone, not
// by Config.AttemptTimeout.
func longCall[Req, Resp any](ctx context.Context, c *Client, op string, req Req, rpc func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	resp, err := sent(ctx, c, req, rpc)
	if err != nil {
		var zero Resp
		return zero, errorOf(op, err)
	}
	return resp, nil
}

// retryable reports whether an attempt's failure leaves the call's outcome
// unknown or undone, so that an idempotent call may be sent again: the
// caller's context must still be alive.
func retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.Aborted, codes.DeadlineExceeded:
		return true
	}
	return false
}

// backoff is the wait before retry n (1 for the first): full jitter over
// BackoffBase·2^(n-1), capped at BackoffCap.
func (c *Client) backoff(n int) time.Duration {
	d := c.cfg.BackoffCap
	if n < 32 {
		d = min(d, c.cfg.BackoffBase<<(n-1))
	}
	if d <= 0 {
		return 0
	}
	return rand.N(d) + 1
}
