package attempt_test

import (
	"context"
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hookline/hookline/attempt"
)

// FuzzCheckURL runs the URL policy on arbitrary URLs, with the test
// resolver (public, private, mapped and metadata answers), in production
// and development mode. Whatever it accepts must be what it promises: an
// absolute https URL (http only in development) on an allowed port,
// without credentials or fragment, within the length cap, whose IP literal
// host passes CheckAddr, and which the policy accepts again unchanged (the
// stored form is a fixed point). Whatever it refuses must not name an
// address the host resolved to. The seed corpus in
// testdata/fuzz/FuzzCheckURL holds the tricky cases of the policy tests.
func FuzzCheckURL(f *testing.F) {
	resolved := []string{"10.0.0.1", "fd00::1", "192.168.1.10", "127.0.0.1", "169.254.169.254", "a9fe:a9fe", "10.1.2.3"}
	f.Fuzz(func(t *testing.T, raw string, dev bool) {
		p := &attempt.Policy{Resolver: testResolver(), AllowPrivate: dev, AllowedPorts: []uint16{443, 8443}}
		u, err := p.CheckURL(context.Background(), raw)
		if err != nil {
			var pe *attempt.PolicyError
			if !errors.As(err, &pe) && !errors.Is(err, attempt.ErrResolve) {
				t.Fatalf("CheckURL(%q) = %v: neither a policy refusal nor a resolve error", raw, err)
			}
			if errors.As(err, &pe) && strings.Contains(err.Error(), "resolves to") {
				for _, a := range resolved {
					if strings.Contains(err.Error(), a) {
						t.Fatalf("refusal %q names the resolved address %s", err, a)
					}
				}
			}
			return
		}
		s := u.String()
		if len(raw) > attempt.MaxURLLength {
			t.Fatalf("accepted a %d-character URL", len(raw))
		}
		switch {
		case u.Scheme != "https" && !(dev && u.Scheme == "http"):
			t.Fatalf("accepted scheme %q from %q", u.Scheme, raw)
		case u.User != nil:
			t.Fatalf("accepted credentials from %q", raw)
		case u.Fragment != "" || strings.Contains(s, "#"):
			t.Fatalf("accepted a fragment from %q: %q", raw, s)
		case u.Host == "" || u.Opaque != "":
			t.Fatalf("accepted %q without a host: %q", raw, s)
		}
		if !dev {
			port := u.Port()
			if port == "" {
				port = "443"
			}
			if n, err := strconv.Atoi(port); err != nil || !slices.Contains(p.AllowedPorts, uint16(n)) {
				t.Fatalf("accepted port %q from %q", port, raw)
			}
		}
		if addr, err := netip.ParseAddr(strings.Trim(u.Hostname(), "[]")); err == nil {
			if err := p.CheckAddr(addr); err != nil {
				t.Fatalf("accepted %q whose address %s the policy refuses: %v", raw, addr, err)
			}
		}
		if _, err := url.Parse(s); err != nil {
			t.Fatalf("the stored form %q of %q does not parse: %v", s, raw, err)
		}
		again, err := p.CheckURL(context.Background(), s)
		if err != nil {
			t.Fatalf("the stored form %q of %q is refused: %v", s, raw, err)
		}
		if again.String() != s {
			t.Fatalf("the stored form is not stable: %q -> %q -> %q", raw, s, again.String())
		}
	})
}

// FuzzCheckAddr checks the address rules on arbitrary IPv4 and IPv6
// addresses against the standard library's classification and the
// embeddings: in production an accepted address is global unicast and in
// none of the ranges Go itself knows as private, loopback, link-local or
// multicast, and it is never an IPv4-mapped or NAT64 address; in every
// mode the metadata addresses are refused, embedded or not. The seed corpus
// in testdata/fuzz/FuzzCheckAddr holds each kind of address the rules name.
func FuzzCheckAddr(f *testing.F) {
	prod, dev := &attempt.Policy{}, &attempt.Policy{AllowPrivate: true}
	meta := []netip.Addr{netip.MustParseAddr("169.254.169.254"), netip.MustParseAddr("168.63.129.16"), netip.MustParseAddr("100.100.100.200"), netip.MustParseAddr("192.0.0.192")}
	f.Fuzz(func(t *testing.T, raw []byte, v4 bool) {
		if len(raw) < 16 {
			return
		}
		addr := netip.AddrFrom16([16]byte(raw[:16]))
		if v4 {
			addr = addr.Unmap()
			if !addr.Is4() {
				b := addr.As16()
				addr = netip.AddrFrom4([4]byte(b[12:]))
			}
		}
		if prod.CheckAddr(addr) == nil {
			u := addr.Unmap()
			if !u.IsGlobalUnicast() || u.IsPrivate() || u.IsLoopback() || u.IsLinkLocalUnicast() || u.IsMulticast() || u.IsUnspecified() {
				t.Fatalf("production accepts %s, which Go classifies as not public", addr)
			}
			if addr.Is4In6() || netip.MustParsePrefix("64:ff9b::/96").Contains(addr) {
				t.Fatalf("production accepts the embedding %s", addr)
			}
		}
		v4part := addr.Unmap()
		if addr.Is6() && !addr.Is4In6() {
			b := addr.As16()
			v4part = netip.AddrFrom4([4]byte(b[12:]))
		}
		if slices.Contains(meta, v4part) && (addr.Is4() || addr.Is4In6() || netip.MustParsePrefix("64:ff9b::/96").Contains(addr) || netip.MustParsePrefix("::/96").Contains(addr)) {
			if prod.CheckAddr(addr) == nil || dev.CheckAddr(addr) == nil {
				t.Fatalf("metadata address %s accepted", addr)
			}
		}
	})
}
