package attempt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/idna"
)

// ErrBlocked is matched (with errors.Is) by every [*PolicyError]: the egress
// policy refused the URL or the address.
var ErrBlocked = errors.New("attempt: destination blocked by egress policy")

// ErrResolve reports that the host of a URL could not be resolved, or
// resolved to no address at all. It is not a policy violation: DNS may answer
// later.
var ErrResolve = errors.New("attempt: cannot resolve host")

// Rules name what a [PolicyError] refused. They are stable strings that the
// control API may return to the user.
const (
	RuleURL      = "url"      // the URL does not parse or is not absolute
	RuleScheme   = "scheme"   // not https (or http in development mode)
	RulePort     = "port"     // port not in the allowlist
	RuleUserinfo = "userinfo" // user:password@ in the URL
	RuleFragment = "fragment" // #fragment in the URL
	RuleZone     = "zone"     // IPv6 zone id (%eth0)
	RuleHost     = "host"     // host name is malformed (IDNA, numeric)
	RuleName     = "name"     // a local-only name: single label, localhost, .internal…
	RuleAddress  = "address"  // an address that is not public unicast
	RuleMetadata = "metadata" // a cloud metadata service address
)

// PolicyError is the error of a refused URL or address. Rule is one of the
// Rule constants; Detail says what was wrong and how to fix it.
// It matches [ErrBlocked] with errors.Is.
type PolicyError struct {
	Rule   string
	Detail string
}

// Error returns "url: " followed by the detail.
func (e *PolicyError) Error() string { return "url: " + e.Detail }

// Is reports whether target is [ErrBlocked].
func (e *PolicyError) Is(target error) bool { return target == ErrBlocked }

func blocked(rule, format string, args ...any) *PolicyError {
	return &PolicyError{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// Resolver looks up the addresses of a host. *net.Resolver implements it;
// tests inject a fake at this process boundary.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// NewDNSResolver returns a resolver that sends every query to the DNS server
// at server ("HOST:PORT"), whatever /etc/resolv.conf says. It uses Go's own
// resolver, so the answer does not depend on the C library.
func NewDNSResolver(server string) *net.Resolver {
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}
}

// DefaultPorts are the ports a [Policy] admits when AllowedPorts is empty.
var DefaultPorts = []uint16{443}

// Policy is the egress policy for customer URLs.
//
// The zero value is the production policy: https on port 443 only, and every
// resolved address must be public unicast. A Policy is safe for concurrent
// use once it is no longer modified.
type Policy struct {
	// AllowedPorts are the ports an https URL may name. Empty means
	// [DefaultPorts] (443).
	AllowedPorts []uint16

	// AllowPrivate is the development flag: it admits plain http, any port,
	// local names (localhost, single-label, .internal…) and loopback,
	// private and link-local addresses. Cloud metadata addresses,
	// unspecified, multicast and broadcast addresses stay refused even then.
	// Never set it in production; the server prints it loudly at start.
	AllowPrivate bool

	// Resolver resolves host names. Nil means net.DefaultResolver.
	Resolver Resolver
}

func (p *Policy) resolver() Resolver {
	if p.Resolver == nil {
		return net.DefaultResolver
	}
	return p.Resolver
}

func (p *Policy) ports() []uint16 {
	if len(p.AllowedPorts) == 0 {
		return DefaultPorts
	}
	return p.AllowedPorts
}

// target is a URL that passed the static rules (everything but DNS).
type target struct {
	url  *url.URL
	host string     // normalised host name, or the address in canonical form
	addr netip.Addr // set when the host is an IP literal
	port uint16
}

// CheckURL checks a customer URL at registration and returns its normalised
// form, which is what should be stored: lower-case scheme, IDNA (A-label)
// host, IP literals in canonical form. It resolves the host through the
// policy's resolver and requires every A and AAAA answer to pass
// [Policy.CheckAddr].
//
// A refused URL gives a [*PolicyError] (errors.Is [ErrBlocked]); a host that
// does not resolve gives an error matching [ErrResolve].
func (p *Policy) CheckURL(ctx context.Context, raw string) (*url.URL, error) {
	t, err := p.checkStatic(raw)
	if err != nil {
		return nil, err
	}
	if t.addr.IsValid() {
		if err := p.CheckAddr(t.addr); err != nil {
			return nil, err
		}
		return t.url, nil
	}
	if _, err := p.resolve(ctx, t.host); err != nil {
		return nil, err
	}
	return t.url, nil
}

// resolve looks host up and checks every answer. All must pass.
//
// Its errors go back to the tenant that registered the URL (at
// registration, and in the delivery history at every attempt), so they
// never name a resolved address, its range, or the resolver: a refused
// answer says only that the host resolves to a non-public address, and a
// failed lookup only why it failed. Otherwise registrations would map the
// node's internal DNS view.
func (p *Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	answers, err := p.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %s", ErrResolve, host, lookupReason(err))
	}
	if len(answers) == 0 {
		return nil, fmt.Errorf("%w %s: no addresses", ErrResolve, host)
	}
	addrs := make([]netip.Addr, 0, len(answers))
	for _, a := range answers {
		// Resolvers hand IPv4 answers over in 16-byte form; check them
		// as the IPv4 addresses they are.
		addr, ok := netip.AddrFromSlice(a.IP)
		addr = addr.Unmap()
		if !ok {
			return nil, fmt.Errorf("%w %s: malformed answer", ErrResolve, host)
		}
		if err := p.CheckAddr(addr); err != nil {
			var pe *PolicyError
			if errors.As(err, &pe) {
				return nil, blocked(pe.Rule, "host %s resolves to an address that is not public; webhook endpoints must resolve only to public unicast addresses", host)
			}
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

// lookupReason says why a lookup failed without the resolver's own text,
// which names the DNS server's address.
func lookupReason(err error) string {
	var de *net.DNSError
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return "lookup cancelled or timed out"
	case errors.As(err, &de) && de.IsNotFound:
		return "no such host"
	case errors.As(err, &de) && de.IsTimeout:
		return "DNS timed out"
	}
	return "DNS lookup failed"
}

// MaxURLLength is the longest endpoint URL the policy admits, in bytes.
const MaxURLLength = 2048

// checkStatic applies every rule that needs no DNS.
func (p *Policy) checkStatic(raw string) (target, error) {
	if len(raw) > MaxURLLength {
		return target{}, blocked(RuleURL, "the URL is %d characters long; use at most %d", len(raw), MaxURLLength)
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Error repeats the whole URL; say only why it failed.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return target{}, blocked(RuleURL, "cannot parse the URL (%v); give an absolute https URL", err)
	}
	switch {
	case u.Scheme == "https", IsBrokerScheme(u.Scheme):
	case u.Scheme == "http" && p.AllowPrivate:
	default:
		return target{}, blocked(RuleScheme, "scheme %q is not allowed; use https (or nats:// for a NATS JetStream subject, amqp:// or amqps:// for a RabbitMQ exchange)", u.Scheme)
	}
	if u.Opaque != "" || u.Host == "" {
		return target{}, blocked(RuleURL, "the URL has no host; give an absolute URL such as https://example.com/webhooks")
	}
	if u.User != nil && !IsBrokerScheme(u.Scheme) {
		return target{}, blocked(RuleUserinfo, "credentials in the URL are not allowed; remove the user:password@ part and authenticate with the webhook signature")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return target{}, blocked(RuleFragment, "a fragment is not allowed; remove the #… part (it is never sent to the server)")
	}
	hostname := u.Hostname()
	if strings.Contains(hostname, "%") {
		return target{}, blocked(RuleZone, "IPv6 zone ids are not allowed; give a public address or host name")
	}

	port, err := p.checkPort(u)
	if err != nil {
		return target{}, err
	}
	switch u.Scheme {
	case SchemeNATS:
		if err := checkSubject(u); err != nil {
			return target{}, err
		}
	case SchemeAMQP, SchemeAMQPS:
		if _, err := parseAMQP(u); err != nil {
			return target{}, err
		}
	}

	t := target{port: port}
	if strings.HasPrefix(u.Host, "[") {
		addr, err := netip.ParseAddr(hostname)
		if err != nil || !addr.Is6() {
			return target{}, blocked(RuleHost, "%q is not a valid IPv6 address; write IPv6 literals as [2001:db8::1]", hostname)
		}
		t.addr = addr
		t.host = addr.String()
	} else {
		host, addr, err := p.normaliseHost(hostname)
		if err != nil {
			return target{}, err
		}
		t.host, t.addr = host, addr
	}

	norm := *u
	norm.Fragment, norm.RawFragment = "", ""
	hostPart := t.host
	if t.addr.Is6() {
		hostPart = "[" + t.host + "]"
	}
	if u.Port() != "" {
		hostPart = net.JoinHostPort(strings.Trim(hostPart, "[]"), strconv.Itoa(int(port)))
	}
	norm.Host = hostPart
	t.url = &norm
	return t, nil
}

func (p *Policy) checkPort(u *url.URL) (uint16, error) {
	var port uint16
	switch s := u.Port(); {
	case s != "":
		n, err := strconv.ParseUint(s, 10, 16)
		if err != nil || n == 0 {
			return 0, blocked(RulePort, "port %q is not a valid port number", s)
		}
		port = uint16(n)
	case u.Scheme == "http":
		port = 80
	case IsBrokerScheme(u.Scheme):
		port = brokerPort(u.Scheme)
	default:
		port = 443
	}
	if p.AllowPrivate || slices.Contains(p.ports(), port) || IsBrokerScheme(u.Scheme) && port == brokerPort(u.Scheme) {
		return port, nil
	}
	return 0, blocked(RulePort, "port %d is not allowed (allowed: %s); use https on an allowed port", port, joinPorts(p.ports()))
}

func joinPorts(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ", ")
}

// localSuffixes are name suffixes that only ever mean something inside a
// private network (RFC 6761, RFC 6762, RFC 8375, and common conventions).
var localSuffixes = []string{".localhost", ".local", ".internal", ".home.arpa", ".localdomain", ".lan", ".intranet", ".corp"}

// deniedNames are explicit names of metadata services, listed even where a
// suffix rule covers them.
var deniedNames = []string{
	"localhost",
	"metadata.google.internal",   // GCP
	"metadata.goog",              // GCP
	"metadata",                   // GCP short name
	"instance-data",              // AWS short name
	"instance-data.ec2.internal", // AWS
}

// normaliseHost turns a non-bracketed host into its IDNA A-label form, or
// into an IPv4 address when it ends in a number (WHATWG URL host parsing),
// and applies the name rules.
func (p *Policy) normaliseHost(hostname string) (string, netip.Addr, error) {
	h := strings.TrimSuffix(hostname, ".")
	if h == "" {
		return "", netip.Addr{}, blocked(RuleHost, "the host is empty; give a public host name")
	}
	ascii, err := idna.Lookup.ToASCII(h)
	if err != nil {
		return "", netip.Addr{}, blocked(RuleHost, "host %q is not a valid domain name (%v); give a public host name", hostname, err)
	}
	if endsInNumber(ascii) {
		addr, ok := parseIPv4(ascii)
		if !ok {
			return "", netip.Addr{}, blocked(RuleHost, "host %q ends in a number but is not a valid IPv4 address; give a public host name or address", hostname)
		}
		return addr.String(), addr, nil
	}
	if addr, err := netip.ParseAddr(ascii); err == nil {
		// An IPv6 literal without brackets cannot reach here through
		// url.Parse, but refuse it clearly if it does.
		return "", netip.Addr{}, blocked(RuleHost, "IPv6 address %s must be written in brackets, as [%s]", addr, addr)
	}
	if p.AllowPrivate {
		return ascii, netip.Addr{}, nil
	}
	if slices.Contains(deniedNames, ascii) {
		return "", netip.Addr{}, blocked(RuleName, "host %s names a local or metadata service; give a public host name", ascii)
	}
	for _, s := range localSuffixes {
		if strings.HasSuffix(ascii, s) {
			return "", netip.Addr{}, blocked(RuleName, "host %s is in %s, which only resolves inside private networks; give a public host name", ascii, s)
		}
	}
	if !strings.Contains(ascii, ".") {
		return "", netip.Addr{}, blocked(RuleName, "single-label host %s is not allowed; give a fully qualified public host name such as hooks.example.com", ascii)
	}
	return ascii, netip.Addr{}, nil
}
