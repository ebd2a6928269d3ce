package control

import (
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestAuthenticatingBound: at most maxAuthenticating calls are
// authenticated at once; one more is refused UNAVAILABLE without its
// lookup, and a slot frees when a lookup ends.
func TestAuthenticatingBound(t *testing.T) {
	l := newLimiter(DefaultMaxInFlight, DefaultMaxInFlightPerCaller, 0)
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(maxAuthenticating)
	for range maxAuthenticating {
		done.Go(func() {
			_, _ = l.authenticate(func() (Caller, error) {
				started.Done()
				<-release
				return Caller{}, nil
			})
		})
	}
	started.Wait()
	looked := false
	_, err := l.authenticate(func() (Caller, error) { looked = true; return Caller{}, nil })
	if status.Code(err) != codes.Unavailable || looked {
		t.Fatalf("one more while %d are being authenticated: %v (looked up: %v), want UNAVAILABLE before any lookup", maxAuthenticating, err, looked)
	}
	close(release)
	done.Wait()
	if _, err := l.authenticate(func() (Caller, error) { return Caller{TenantID: "acme"}, nil }); err != nil {
		t.Fatalf("once they ended: %v", err)
	}
}
