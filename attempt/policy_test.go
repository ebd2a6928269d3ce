package attempt_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/hookline/hookline/attempt"
)

func testResolver() *fakeResolver {
	return newFakeResolver(map[string][]string{
		"hooks.example.com":         {"93.184.216.34"},
		"v6.example.com":            {"2606:2800:220:1:248:1893:25c8:1946"},
		"dual.example.com":          {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
		"mixed.example.com":         {"93.184.216.34", "10.0.0.1"},
		"mixed6.example.com":        {"2606:2800:220:1:248:1893:25c8:1946", "fd00::1"},
		"private.example.com":       {"192.168.1.10"},
		"loopback.example.com":      {"127.0.0.1"},
		"mapped.example.com":        {"::ffff:127.0.0.1"},
		"meta.example.com":          {"169.254.169.254"},
		"nat64.example.com":         {"64:ff9b::a9fe:a9fe"},
		"empty.example.com":         nil,
		"xn--bcher-kva.example.com": {"93.184.216.34"},
		"localhost":                 {"127.0.0.1"},
		"devbox":                    {"10.1.2.3"},
	})
}

func TestCheckURLAccepts(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"plain", "https://hooks.example.com/webhooks", "https://hooks.example.com/webhooks"},
		{"query kept", "https://hooks.example.com/w?a=1&b=2", "https://hooks.example.com/w?a=1&b=2"},
		{"case folded", "HTTPS://Hooks.EXAMPLE.com/Path", "https://hooks.example.com/Path"},
		{"trailing dot", "https://hooks.example.com./w", "https://hooks.example.com/w"},
		{"explicit 443", "https://hooks.example.com:443/w", "https://hooks.example.com:443/w"},
		{"idna", "https://bücher.example.com/w", "https://xn--bcher-kva.example.com/w"},
		{"idna upper", "https://BÜCHER.example.com/w", "https://xn--bcher-kva.example.com/w"},
		{"punycode", "https://xn--bcher-kva.example.com/w", "https://xn--bcher-kva.example.com/w"},
		{"ipv6 answer", "https://v6.example.com/", "https://v6.example.com/"},
		{"dual stack", "https://dual.example.com/", "https://dual.example.com/"},
		{"public ipv4 literal", "https://8.8.8.8/", "https://8.8.8.8/"},
		{"public ipv4 decimal", "https://134744072/", "https://8.8.8.8/"},
		{"public ipv4 hex", "https://0x8.0x8.0x8.0x8/", "https://8.8.8.8/"},
		{"public ipv6 literal", "https://[2606:4700:4700::1111]/", "https://[2606:4700:4700::1111]/"},
		{"public ipv6 literal port", "https://[2606:4700:4700:0::1111]:443/", "https://[2606:4700:4700::1111]:443/"},
		{"nats subject", "nats://hooks.example.com/webhooks.orders", "nats://hooks.example.com/webhooks.orders"},
		{"nats port 4222", "nats://hooks.example.com:4222/webhooks", "nats://hooks.example.com:4222/webhooks"},
		{"nats credentials", "nats://user:pw@hooks.example.com/webhooks", "nats://user:pw@hooks.example.com/webhooks"},
		{"amqp exchange and key", "amqp://hooks.example.com/?exchange=hooks&routing_key=orders", "amqp://hooks.example.com/?exchange=hooks&routing_key=orders"},
		{"amqp vhost and credentials", "amqp://app:pw@hooks.example.com/prod?routing_key=orders", "amqp://app:pw@hooks.example.com/prod?routing_key=orders"},
		{"amqps port 5671", "amqps://hooks.example.com:5671/?exchange=hooks", "amqps://hooks.example.com:5671/?exchange=hooks"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &attempt.Policy{Resolver: testResolver()}
			got, err := p.CheckURL(context.Background(), tt.raw)
			if err != nil {
				t.Fatalf("CheckURL(%q): %v", tt.raw, err)
			}
			if got.String() != tt.want {
				t.Errorf("CheckURL(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestCheckURLRefuses(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		rule string
	}{
		// Scheme, port, userinfo, fragment, zone.
		{"http", "http://hooks.example.com/", attempt.RuleScheme},
		{"ftp", "ftp://hooks.example.com/", attempt.RuleScheme},
		{"no scheme", "hooks.example.com/w", attempt.RuleScheme},
		{"opaque", "https:hooks.example.com", attempt.RuleURL},
		{"no host", "https:///w", attempt.RuleURL},
		{"unparsable", "https://hooks.example.com:port/", attempt.RuleURL},
		{"port", "https://hooks.example.com:8443/", attempt.RulePort},
		{"port 80", "https://hooks.example.com:80/", attempt.RulePort},
		{"port zero", "https://hooks.example.com:0/", attempt.RulePort},
		{"userinfo", "https://user:secret@hooks.example.com/", attempt.RuleUserinfo},
		{"user only", "https://user@hooks.example.com/", attempt.RuleUserinfo},
		{"fragment", "https://hooks.example.com/w#x", attempt.RuleFragment},
		{"empty fragment", "https://hooks.example.com/w#", attempt.RuleFragment},
		{"zone", "https://[fe80::1%25eth0]/", attempt.RuleZone},
		{"nats other port", "nats://hooks.example.com:4223/webhooks", attempt.RulePort},
		{"https credentials", "https://user:pw@hooks.example.com/webhooks", attempt.RuleUserinfo},
		{"amqp nowhere", "amqp://hooks.example.com/", attempt.RuleURL},
		{"amqp other query", "amqp://hooks.example.com/?exchange=hooks&heartbeat=5", attempt.RuleURL},
		{"amqp twice", "amqp://hooks.example.com/?exchange=a&exchange=b", attempt.RuleURL},
		{"amqp vhost path", "amqp://hooks.example.com/a/b?exchange=hooks", attempt.RuleURL},
		{"amqp other port", "amqp://hooks.example.com:5673/?exchange=hooks", attempt.RulePort},
		{"amqps plain port", "amqps://hooks.example.com:5672/?exchange=hooks", attempt.RulePort},
		{"amqp private", "amqp://10.0.0.5/?exchange=hooks", attempt.RuleAddress},
		{"nats no subject", "nats://hooks.example.com/", attempt.RuleURL},
		{"nats wildcard", "nats://hooks.example.com/webhooks.>", attempt.RuleURL},
		{"nats empty token", "nats://hooks.example.com/webhooks..orders", attempt.RuleURL},
		{"nats query", "nats://hooks.example.com/webhooks?x=1", attempt.RuleURL},
		{"nats private", "nats://127.0.0.1/webhooks", attempt.RuleAddress},

		// Local names.
		{"localhost", "https://localhost/", attempt.RuleName},
		{"localhost upper dot", "https://LOCALHOST./", attempt.RuleName},
		{"sub localhost", "https://app.localhost/", attempt.RuleName},
		{"mdns", "https://printer.local/", attempt.RuleName},
		{"internal", "https://db.internal/", attempt.RuleName},
		{"gcp metadata name", "https://metadata.google.internal/computeMetadata/v1/", attempt.RuleName},
		{"home arpa", "https://nas.home.arpa/", attempt.RuleName},
		{"localdomain", "https://box.localdomain/", attempt.RuleName},
		{"single label", "https://devbox/", attempt.RuleName},
		{"bad idna", "https://xn--a.example.com/", attempt.RuleHost},
		{"underscore", "https://a_b.example.com/", attempt.RuleHost},

		// 127.0.0.1 in every encoding.
		{"dotted", "https://127.0.0.1/", attempt.RuleAddress},
		{"decimal", "https://2130706433/", attempt.RuleAddress},
		{"octal", "https://0177.0.0.1/", attempt.RuleAddress},
		{"octal long", "https://017700000001/", attempt.RuleAddress},
		{"hex", "https://0x7f000001/", attempt.RuleAddress},
		{"hex upper", "https://0X7F000001/", attempt.RuleAddress},
		{"hex short", "https://0x7f.1/", attempt.RuleAddress},
		{"short", "https://127.1/", attempt.RuleAddress},
		{"short three", "https://127.0.1/", attempt.RuleAddress},
		{"mixed", "https://0x7f.0.0x0.01/", attempt.RuleAddress},
		{"octal short", "https://0177.1/", attempt.RuleAddress},
		{"trailing dot", "https://127.0.0.1./", attempt.RuleAddress},
		{"percent encoded", "https://%31%32%37.0.0.1/", attempt.RuleURL}, // net/url refuses it
		{"fullwidth digits", "https://１２７.０.０.１/", attempt.RuleAddress},
		{"ideographic dots", "https://127。0。0。1/", attempt.RuleAddress},
		{"zero", "https://0/", attempt.RuleAddress},
		{"zero dotted", "https://0.0.0.0/", attempt.RuleAddress},
		{"ipv6 loopback", "https://[::1]/", attempt.RuleAddress},
		{"ipv6 loopback long", "https://[0:0:0:0:0:0:0:1]/", attempt.RuleAddress},
		{"ipv4 mapped", "https://[::ffff:127.0.0.1]/", attempt.RuleAddress},
		{"ipv4 mapped hex", "https://[::ffff:7f00:1]/", attempt.RuleAddress},
		{"ipv4 mapped public", "https://[::ffff:8.8.8.8]/", attempt.RuleAddress},
		{"ipv4 compatible", "https://[::127.0.0.1]/", attempt.RuleAddress},
		{"nat64 loopback", "https://[64:ff9b::7f00:1]/", attempt.RuleAddress},
		{"ipv4 in brackets", "https://[127.0.0.1]/", attempt.RuleURL},
		{"too many parts", "https://1.2.3.4.5/", attempt.RuleHost},
		{"part too big", "https://256.0.0.1/", attempt.RuleHost},
		{"number too big", "https://4294967296/", attempt.RuleHost},
		{"bad octal", "https://08.0.0.1/", attempt.RuleHost},
		{"numeric tld", "https://example.123/", attempt.RuleHost},

		// Metadata, by address and in disguise.
		{"aws metadata", "https://169.254.169.254/latest/meta-data/", attempt.RuleMetadata},
		{"aws metadata decimal", "https://2852039166/", attempt.RuleMetadata},
		{"aws metadata mapped", "https://[::ffff:169.254.169.254]/", attempt.RuleMetadata},
		{"aws metadata nat64", "https://[64:ff9b::a9fe:a9fe]/", attempt.RuleMetadata},
		{"aws metadata v6", "https://[fd00:ec2::254]/", attempt.RuleMetadata},
		{"azure wireserver", "https://168.63.129.16/", attempt.RuleMetadata},
		{"oracle", "https://192.0.0.192/", attempt.RuleMetadata},
		{"alibaba", "https://100.100.100.200/", attempt.RuleMetadata},

		// DNS answers: all must pass.
		{"resolves private", "https://private.example.com/", attempt.RuleAddress},
		{"resolves loopback", "https://loopback.example.com/", attempt.RuleAddress},
		{"resolves mapped loopback", "https://mapped.example.com/", attempt.RuleAddress},
		{"resolves metadata", "https://meta.example.com/", attempt.RuleMetadata},
		{"resolves nat64 metadata", "https://nat64.example.com/", attempt.RuleMetadata},
		{"mixed answers", "https://mixed.example.com/", attempt.RuleAddress},
		{"mixed v6 answers", "https://mixed6.example.com/", attempt.RuleAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &attempt.Policy{Resolver: testResolver()}
			got, err := p.CheckURL(context.Background(), tt.raw)
			if err == nil {
				t.Fatalf("CheckURL(%q) = %q, want refusal by rule %q", tt.raw, got, tt.rule)
			}
			if !errors.Is(err, attempt.ErrBlocked) {
				t.Fatalf("CheckURL(%q) error %v does not match ErrBlocked", tt.raw, err)
			}
			var pe *attempt.PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("CheckURL(%q) error %T is not a *PolicyError", tt.raw, err)
			}
			if pe.Rule != tt.rule {
				t.Errorf("CheckURL(%q) rule = %q (%v), want %q", tt.raw, pe.Rule, err, tt.rule)
			}
		})
	}
}

func TestCheckURLErrorMessages(t *testing.T) {
	tests := []struct {
		name   string
		policy attempt.Policy
		raw    string
		want   string
	}{
		{
			name: "port",
			raw:  "https://hooks.example.com:8443/",
			want: "url: port 8443 is not allowed (allowed: 443); use https on an allowed port",
		},
		{
			name:   "port custom list",
			policy: attempt.Policy{AllowedPorts: []uint16{443, 8443}},
			raw:    "https://hooks.example.com:9000/",
			want:   "url: port 9000 is not allowed (allowed: 443, 8443); use https on an allowed port",
		},
		{
			name: "scheme",
			raw:  "http://hooks.example.com/",
			want: `url: scheme "http" is not allowed; use https (or nats:// for a NATS JetStream subject, amqp:// or amqps:// for a RabbitMQ exchange)`,
		},
		{
			name: "resolved private",
			raw:  "https://mixed.example.com/",
			want: "url: host mixed.example.com resolves to an address that is not public; webhook endpoints must resolve only to public unicast addresses",
		},
		{
			name: "too long",
			raw:  "https://hooks.example.com/" + strings.Repeat("a", 100000),
			want: "url: the URL is 100026 characters long; use at most 2048",
		},
		{
			name: "single label",
			raw:  "https://devbox/",
			want: "url: single-label host devbox is not allowed; give a fully qualified public host name such as hooks.example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.policy
			p.Resolver = testResolver()
			_, err := p.CheckURL(context.Background(), tt.raw)
			if err == nil || err.Error() != tt.want {
				t.Errorf("CheckURL(%q) error = %v, want %q", tt.raw, err, tt.want)
			}
		})
	}
}

func TestCheckURLCustomPorts(t *testing.T) {
	p := &attempt.Policy{AllowedPorts: []uint16{8443}, Resolver: testResolver()}
	if _, err := p.CheckURL(context.Background(), "https://hooks.example.com:8443/"); err != nil {
		t.Errorf("port 8443 in the allowlist: %v", err)
	}
	if _, err := p.CheckURL(context.Background(), "https://hooks.example.com/"); !errors.Is(err, attempt.ErrBlocked) {
		t.Errorf("default port 443 outside the allowlist: error = %v, want ErrBlocked", err)
	}
}

func TestCheckURLResolveFailure(t *testing.T) {
	tests := []struct {
		name string
		raw  string
	}{
		{"not found", "https://nowhere.example.com/"},
		{"no answers", "https://empty.example.com/"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &attempt.Policy{Resolver: testResolver()}
			_, err := p.CheckURL(context.Background(), tt.raw)
			if !errors.Is(err, attempt.ErrResolve) {
				t.Fatalf("CheckURL(%q) error = %v, want ErrResolve", tt.raw, err)
			}
			if errors.Is(err, attempt.ErrBlocked) {
				t.Errorf("CheckURL(%q) error %v matches ErrBlocked; DNS failure is not a policy refusal", tt.raw, err)
			}
		})
	}
}

// resolverFunc is a resolver made of a function, for failures the map
// resolver cannot give.
type resolverFunc func(ctx context.Context, host string) ([]net.IPAddr, error)

func (f resolverFunc) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	return f(ctx, host)
}

// TestCheckURLRevealsNoAddress: a refusal goes back to the tenant that
// registered the URL, so it must not name what the host resolved to (nor
// its range), nor the node's DNS server: that would map the internal DNS
// view one registration at a time.
func TestCheckURLRevealsNoAddress(t *testing.T) {
	answers := map[string][]string{
		"mixed.example.com":    {"93.184.216.34", "10.0.0.1"},
		"private.example.com":  {"192.168.1.10"},
		"loopback.example.com": {"127.0.0.1"},
		"meta.example.com":     {"169.254.169.254"},
		"ula.example.com":      {"fd12:3456::7"},
		"mapped.example.com":   {"::ffff:10.1.2.3"},
	}
	for host, addrs := range answers {
		t.Run(host, func(t *testing.T) {
			p := &attempt.Policy{Resolver: newFakeResolver(answers)}
			_, err := p.CheckURL(context.Background(), "https://"+host+"/in")
			if !errors.Is(err, attempt.ErrBlocked) {
				t.Fatalf("CheckURL error = %v, want ErrBlocked", err)
			}
			for _, a := range append(addrs, "10.0.0.0", "192.168.", "127.0.0", "169.254", "fd00", "fc00", "/8", "/16", "/7") {
				if a != "93.184.216.34" && strings.Contains(err.Error(), a) {
					t.Errorf("error %q names %q", err, a)
				}
			}
		})
	}
	t.Run("resolver failure", func(t *testing.T) {
		p := &attempt.Policy{Resolver: resolverFunc(func(_ context.Context, host string) ([]net.IPAddr, error) {
			return nil, &net.DNSError{Err: "server misbehaving", Name: host, Server: "10.53.0.2:53", IsTemporary: true}
		})}
		_, err := p.CheckURL(context.Background(), "https://internal.example.com/in")
		if !errors.Is(err, attempt.ErrResolve) {
			t.Fatalf("CheckURL error = %v, want ErrResolve", err)
		}
		if strings.Contains(err.Error(), "10.53.0.2") || strings.Contains(err.Error(), "misbehaving") {
			t.Errorf("error %q repeats the resolver's own message", err)
		}
	})
}

func TestCheckURLAllowPrivate(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    string // normalised URL; empty means refused
		refused string // rule when refused
	}{
		{name: "http localhost", raw: "http://localhost:3000/hooks", want: "http://localhost:3000/hooks"},
		{name: "loopback any port", raw: "https://127.0.0.1:9443/", want: "https://127.0.0.1:9443/"},
		{name: "short loopback", raw: "https://127.1:9443/", want: "https://127.0.0.1:9443/"},
		{name: "ipv6 loopback", raw: "https://[::1]:9443/", want: "https://[::1]:9443/"},
		{name: "single label private", raw: "http://devbox:8080/", want: "http://devbox:8080/"},
		{name: "private literal", raw: "https://10.0.0.5/", want: "https://10.0.0.5/"},
		{name: "public still fine", raw: "https://hooks.example.com/", want: "https://hooks.example.com/"},
		{name: "ftp", raw: "ftp://localhost/", refused: attempt.RuleScheme},
		{name: "userinfo", raw: "http://u:p@localhost/", refused: attempt.RuleUserinfo},
		{name: "metadata", raw: "http://169.254.169.254/", refused: attempt.RuleMetadata},
		{name: "metadata mapped", raw: "http://[::ffff:a9fe:a9fe]/", refused: attempt.RuleMetadata},
		{name: "metadata resolved", raw: "http://meta.example.com/", refused: attempt.RuleMetadata},
		{name: "alibaba", raw: "http://100.100.100.200/", refused: attempt.RuleMetadata},
		{name: "unspecified", raw: "http://0.0.0.0:8080/", refused: attempt.RuleAddress},
		{name: "broadcast", raw: "http://255.255.255.255/", refused: attempt.RuleAddress},
		{name: "multicast", raw: "http://224.0.0.1/", refused: attempt.RuleAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &attempt.Policy{AllowPrivate: true, Resolver: testResolver()}
			got, err := p.CheckURL(context.Background(), tt.raw)
			if tt.refused != "" {
				var pe *attempt.PolicyError
				if !errors.As(err, &pe) || pe.Rule != tt.refused {
					t.Fatalf("CheckURL(%q) error = %v, want rule %q", tt.raw, err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatalf("CheckURL(%q): %v", tt.raw, err)
			}
			if got.String() != tt.want {
				t.Errorf("CheckURL(%q) = %q, want %q", tt.raw, got, tt.want)
			}
		})
	}
}

func TestCheckAddr(t *testing.T) {
	tests := []struct {
		name string
		addr string
		rule string // empty: allowed
	}{
		{"public v4", "93.184.216.34", ""},
		{"public v4 dns", "1.1.1.1", ""},
		{"public v6", "2606:4700:4700::1111", ""},
		{"public v6 google", "2001:4860:4860::8888", ""},

		{"this network", "0.1.2.3", attempt.RuleAddress},
		{"unspecified v4", "0.0.0.0", attempt.RuleAddress},
		{"private 10", "10.1.2.3", attempt.RuleAddress},
		{"private 172", "172.16.0.1", attempt.RuleAddress},
		{"private 172 top", "172.31.255.254", attempt.RuleAddress},
		{"private 192", "192.168.0.1", attempt.RuleAddress},
		{"cgnat", "100.64.0.1", attempt.RuleAddress},
		{"cgnat top", "100.127.255.254", attempt.RuleAddress},
		{"loopback", "127.0.0.1", attempt.RuleAddress},
		{"loopback other", "127.255.0.9", attempt.RuleAddress},
		{"link local", "169.254.1.1", attempt.RuleAddress},
		{"ietf", "192.0.0.8", attempt.RuleAddress},
		{"documentation 1", "192.0.2.1", attempt.RuleAddress},
		{"documentation 2", "198.51.100.1", attempt.RuleAddress},
		{"documentation 3", "203.0.113.1", attempt.RuleAddress},
		{"6to4 relay", "192.88.99.1", attempt.RuleAddress},
		{"benchmarking", "198.18.0.1", attempt.RuleAddress},
		{"benchmarking top", "198.19.255.254", attempt.RuleAddress},
		{"multicast", "224.0.0.251", attempt.RuleAddress},
		{"multicast top", "239.255.255.250", attempt.RuleAddress},
		{"reserved", "240.0.0.1", attempt.RuleAddress},
		{"broadcast", "255.255.255.255", attempt.RuleAddress},

		{"unspecified v6", "::", attempt.RuleAddress},
		{"loopback v6", "::1", attempt.RuleAddress},
		{"mapped loopback", "::ffff:127.0.0.1", attempt.RuleAddress},
		{"mapped public", "::ffff:8.8.8.8", attempt.RuleAddress},
		{"compatible", "::8.8.8.8", attempt.RuleAddress},
		{"translated", "::ffff:0:8.8.8.8", attempt.RuleAddress},
		{"nat64", "64:ff9b::808:808", attempt.RuleAddress},
		{"nat64 local", "64:ff9b:1::808:808", attempt.RuleAddress},
		{"discard", "100::1", attempt.RuleAddress},
		{"teredo", "2001:0:4136:e378:8000:63bf:3fff:fdd2", attempt.RuleAddress},
		{"ietf v6", "2001:2::1", attempt.RuleAddress},
		{"documentation v6", "2001:db8::1", attempt.RuleAddress},
		{"documentation v6 new", "3fff::1", attempt.RuleAddress},
		{"6to4", "2002:c000:0204::1", attempt.RuleAddress},
		{"ula", "fd12:3456:789a::1", attempt.RuleAddress},
		{"ula fc", "fc00::1", attempt.RuleAddress},
		{"link local v6", "fe80::1", attempt.RuleAddress},
		{"link local v6 zone", "fe80::1%eth0", attempt.RuleAddress},
		{"site local", "fec0::1", attempt.RuleAddress},
		{"multicast v6", "ff02::1", attempt.RuleAddress},
		{"outside global unicast", "4000::1", attempt.RuleAddress},

		{"aws", "169.254.169.254", attempt.RuleMetadata},
		{"aws ecs", "169.254.170.2", attempt.RuleMetadata},
		{"aws v6", "fd00:ec2::254", attempt.RuleMetadata},
		{"gcp", "169.254.169.254", attempt.RuleMetadata},
		{"azure", "168.63.129.16", attempt.RuleMetadata},
		{"oracle", "192.0.0.192", attempt.RuleMetadata},
		{"alibaba", "100.100.100.200", attempt.RuleMetadata},
		{"aws mapped", "::ffff:169.254.169.254", attempt.RuleMetadata},
		{"aws nat64", "64:ff9b::169.254.169.254", attempt.RuleMetadata},
	}
	var p attempt.Policy
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := p.CheckAddr(netip.MustParseAddr(tt.addr))
			if tt.rule == "" {
				if err != nil {
					t.Errorf("CheckAddr(%s): %v", tt.addr, err)
				}
				return
			}
			var pe *attempt.PolicyError
			if !errors.As(err, &pe) {
				t.Fatalf("CheckAddr(%s) = %v, want rule %q", tt.addr, err, tt.rule)
			}
			if pe.Rule != tt.rule {
				t.Errorf("CheckAddr(%s) rule = %q (%v), want %q", tt.addr, pe.Rule, err, tt.rule)
			}
			if !errors.Is(err, attempt.ErrBlocked) {
				t.Errorf("CheckAddr(%s) error does not match ErrBlocked", tt.addr)
			}
		})
	}
}

func TestCheckAddrInvalid(t *testing.T) {
	var p attempt.Policy
	if err := p.CheckAddr(netip.Addr{}); !errors.Is(err, attempt.ErrBlocked) {
		t.Errorf("CheckAddr(zero) = %v, want ErrBlocked", err)
	}
}
