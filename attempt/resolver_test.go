package attempt_test

import (
	"context"
	"net"
	"net/netip"
	"sync"
)

// fakeResolver answers from a map: the injected resolver at the process
// boundary. A host that is not in the map is "not found"; a host mapped to
// nil answers with no addresses. Safe for concurrent use.
type fakeResolver struct {
	mu      sync.Mutex // guards answers and lookups
	answers map[string][]string
	lookups map[string]int
}

func newFakeResolver(answers map[string][]string) *fakeResolver {
	return &fakeResolver{answers: answers, lookups: map[string]int{}}
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lookups[host]++
	addrs, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	out := make([]net.IPAddr, 0, len(addrs))
	for _, a := range addrs {
		// net.ParseIP gives IPv4 answers in their 16-byte form, as the
		// real resolver does.
		out = append(out, net.IPAddr{IP: net.ParseIP(netip.MustParseAddr(a).String())})
	}
	return out, nil
}

// set changes what host resolves to, as DNS may between registration and
// delivery.
func (r *fakeResolver) set(host string, addrs ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers[host] = addrs
}
