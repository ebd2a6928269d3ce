package main

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/health/grpc_health_v1"
)

// checkCounter is gRPC's health server, telling each Check it answers.
type checkCounter struct {
	*health.Server
	checked chan struct{}
}

func (c checkCounter) Check(ctx context.Context, req *grpc_health_v1.HealthCheckRequest) (*grpc_health_v1.HealthCheckResponse, error) {
	resp, err := c.Server.Check(ctx, req)
	select {
	case c.checked <- struct{}{}:
	default:
	}
	return resp, err
}

// TestWaitServingWaitsForTheHealthCheck: a rolling restart points the
// load at a restarted node only once its health check says serving; while
// it says not serving, WaitServing keeps asking.
func TestWaitServingWaitsForTheHealthCheck(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := checkCounter{Server: health.NewServer(), checked: make(chan struct{}, 1)}
	hs.SetServingStatus("", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	srv := grpc.NewServer()
	grpc_health_v1.RegisterHealthServer(srv, hs)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- WaitServing(ctx, lis.Addr().String()) }()
	for range 3 { // three answers of not serving
		select {
		case <-hs.checked:
		case err := <-done:
			t.Fatalf("WaitServing returned %v while the node said not serving", err)
		case <-ctx.Done():
			t.Fatal("the node was not asked for its health")
		}
	}
	select {
	case err := <-done:
		t.Fatalf("WaitServing returned %v while the node said not serving", err)
	default:
	}
	hs.SetServingStatus("", grpc_health_v1.HealthCheckResponse_SERVING)
	if err := <-done; err != nil {
		t.Fatalf("WaitServing once serving: %v", err)
	}

	// A node that never serves: the caller's deadline ends the wait, and
	// the error says what the node last answered.
	hs.SetServingStatus("", grpc_health_v1.HealthCheckResponse_NOT_SERVING)
	short, cancelShort := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancelShort()
	if err := WaitServing(short, lis.Addr().String()); err == nil {
		t.Fatal("WaitServing returned nil for a node that never served")
	}
}
