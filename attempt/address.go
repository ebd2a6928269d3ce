package attempt

import (
	"net/netip"
	"strconv"
	"strings"

	"code.dny.dev/ssrf"
)

// metadataAddrs are cloud metadata and platform service addresses. They are
// refused in every mode, and listed one by one even where a range below
// covers them, so that no change to the ranges can let them through.
var metadataAddrs = []struct {
	addr netip.Addr
	what string
}{
	{netip.MustParseAddr("169.254.169.254"), "the AWS, GCP, Azure and OpenStack metadata service"},
	{netip.MustParseAddr("169.254.170.2"), "the AWS ECS task metadata service"},
	{netip.MustParseAddr("169.254.169.123"), "the AWS time service"},
	{netip.MustParseAddr("169.254.169.253"), "the AWS DNS resolver"},
	{netip.MustParseAddr("fd00:ec2::254"), "the AWS IPv6 metadata service"},
	{netip.MustParseAddr("fd00:ec2::23"), "the AWS IPv6 DNS resolver"},
	{netip.MustParseAddr("168.63.129.16"), "the Azure platform service (wireserver)"},
	{netip.MustParseAddr("192.0.0.192"), "the Oracle Cloud metadata service"},
	{netip.MustParseAddr("100.100.100.200"), "the Alibaba Cloud metadata service"},
}

// deniedPrefixes are refused unless the policy allows private targets. The
// list is ours, explicit and named so the error says which range matched;
// code.dny.dev/ssrf is consulted after it as a second opinion.
var deniedPrefixes = []struct {
	prefix netip.Prefix
	what   string
}{
	// IPv4.
	{netip.MustParsePrefix("0.0.0.0/8"), "a \"this network\" address"},
	{netip.MustParsePrefix("10.0.0.0/8"), "a private address"},
	{netip.MustParsePrefix("100.64.0.0/10"), "a carrier-grade NAT address"},
	{netip.MustParsePrefix("127.0.0.0/8"), "a loopback address"},
	{netip.MustParsePrefix("169.254.0.0/16"), "a link-local address"},
	{netip.MustParsePrefix("172.16.0.0/12"), "a private address"},
	{netip.MustParsePrefix("192.0.0.0/24"), "an IETF protocol assignment"},
	{netip.MustParsePrefix("192.0.2.0/24"), "a documentation address"},
	{netip.MustParsePrefix("192.31.196.0/24"), "an AS112 address"},
	{netip.MustParsePrefix("192.52.193.0/24"), "an AMT address"},
	{netip.MustParsePrefix("192.88.99.0/24"), "a 6to4 relay anycast address"},
	{netip.MustParsePrefix("192.168.0.0/16"), "a private address"},
	{netip.MustParsePrefix("192.175.48.0/24"), "an AS112 address"},
	{netip.MustParsePrefix("198.18.0.0/15"), "a benchmarking address"},
	{netip.MustParsePrefix("198.51.100.0/24"), "a documentation address"},
	{netip.MustParsePrefix("203.0.113.0/24"), "a documentation address"},
	{netip.MustParsePrefix("224.0.0.0/4"), "a multicast address"},
	{netip.MustParsePrefix("255.255.255.255/32"), "the broadcast address"},
	{netip.MustParsePrefix("240.0.0.0/4"), "a reserved address"},
	// IPv6.
	{netip.MustParsePrefix("::/128"), "the unspecified address"},
	{netip.MustParsePrefix("::1/128"), "a loopback address"},
	{netip.MustParsePrefix("::ffff:0:0/96"), "an IPv4-mapped IPv6 address"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "an IPv4-translated IPv6 address"},
	{netip.MustParsePrefix("::/96"), "an IPv4-compatible IPv6 address"},
	{netip.MustParsePrefix("64:ff9b::/96"), "a NAT64 address"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "a local-use NAT64 address"},
	{netip.MustParsePrefix("100::/64"), "a discard-only address"},
	{netip.MustParsePrefix("2001::/32"), "a Teredo address"},
	{netip.MustParsePrefix("2001::/23"), "an IETF protocol assignment"},
	{netip.MustParsePrefix("2001:db8::/32"), "a documentation address"},
	{netip.MustParsePrefix("2002::/16"), "a 6to4 address"},
	{netip.MustParsePrefix("3fff::/20"), "a documentation address"},
	{netip.MustParsePrefix("5f00::/16"), "an SRv6 SID address"},
	{netip.MustParsePrefix("fc00::/7"), "a unique local address"},
	{netip.MustParsePrefix("fe80::/10"), "a link-local address"},
	{netip.MustParsePrefix("fec0::/10"), "a site-local address"},
	{netip.MustParsePrefix("ff00::/8"), "a multicast address"},
}

// guardian is code.dny.dev/ssrf's classifier, used as a second opinion on
// addresses only (ports and networks are our rules).
var guardian = ssrf.New(ssrf.WithAnyPort(), ssrf.WithAnyNetwork())

const addrFix = "webhook endpoints must resolve only to public unicast addresses"

// CheckAddr reports whether the policy lets the egress client connect to
// addr. Registration ([Policy.CheckURL]) and every dial share it.
//
// In production mode every address must be public unicast: the deny list
// covers private, loopback, link-local, CGNAT, multicast, reserved,
// unspecified, broadcast, documentation and benchmarking ranges, IPv4-mapped,
// -compatible and -translated IPv6, NAT64, 6to4, Teredo and unique local
// addresses, and anything outside 2000::/3. Cloud metadata addresses are
// refused in every mode, also when embedded in IPv4-mapped or NAT64 form.
// The error is a [*PolicyError].
func (p *Policy) CheckAddr(addr netip.Addr) error {
	if !addr.IsValid() {
		return blocked(RuleAddress, "address is missing; %s", addrFix)
	}
	addr = addr.WithZone("")
	if what, ok := metadataService(addr); ok {
		return blocked(RuleMetadata, "address %s is %s; %s", addr, what, addrFix)
	}
	if p.AllowPrivate {
		u := addr.Unmap()
		if u.IsUnspecified() || u.IsMulticast() || u == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
			return blocked(RuleAddress, "address %s is not a unicast address; give a unicast address", addr)
		}
		return nil
	}
	for _, d := range deniedPrefixes {
		if d.prefix.Contains(addr) {
			return blocked(RuleAddress, "address %s is %s (%s); %s", addr, d.what, d.prefix, addrFix)
		}
	}
	if addr.Is6() && !ssrf.IPv6GlobalUnicast.Contains(addr) {
		return blocked(RuleAddress, "address %s is outside the IPv6 global unicast range (2000::/3); %s", addr, addrFix)
	}
	if err := guardian.SafeAddr(addr); err != nil {
		return blocked(RuleAddress, "address %s is not a public unicast address; %s", addr, addrFix)
	}
	if !addr.IsGlobalUnicast() || addr.IsPrivate() || addr.IsLoopback() ||
		addr.IsLinkLocalUnicast() || addr.IsMulticast() || addr.IsUnspecified() {
		return blocked(RuleAddress, "address %s is not a public unicast address; %s", addr, addrFix)
	}
	return nil
}

// embeddingV4 are the IPv6 prefixes whose last 32 bits carry an IPv4 address.
var embeddingV4 = []netip.Prefix{
	netip.MustParsePrefix("::ffff:0:0/96"),   // IPv4-mapped
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated
	netip.MustParsePrefix("::/96"),           // IPv4-compatible
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64
}

// metadataService finds addr in metadataAddrs, also when an IPv4 metadata
// address is embedded in an IPv4-mapped, -compatible or NAT64 IPv6 address.
func metadataService(addr netip.Addr) (string, bool) {
	candidates := []netip.Addr{addr}
	for _, embed := range embeddingV4 {
		if embed.Contains(addr) {
			b := addr.As16()
			candidates = append(candidates, netip.AddrFrom4([4]byte(b[12:16])))
			break
		}
	}
	for _, c := range candidates {
		for _, m := range metadataAddrs {
			if c == m.addr {
				return m.what, true
			}
		}
	}
	return "", false
}

// endsInNumber reports whether the last label of host is a number in the
// WHATWG URL sense (decimal digits, or 0x followed by hex digits), in which
// case the whole host must parse as an IPv4 address.
func endsInNumber(host string) bool {
	labels := strings.Split(host, ".")
	last := labels[len(labels)-1]
	if last == "" {
		if len(labels) == 1 {
			return false
		}
		last = labels[len(labels)-2]
	}
	if last == "" {
		return false
	}
	if isDigits(last) {
		return true
	}
	if len(last) >= 2 && (last[:2] == "0x" || last[:2] == "0X") {
		return isHex(last[2:])
	}
	return false
}

// parseIPv4 parses an IPv4 address in every form that inet_aton and the
// WHATWG URL parser accept: one to four parts, each decimal, octal (leading
// 0) or hexadecimal (0x), the last part filling the remaining bytes, so
// 2130706433, 0177.0.0.1, 0x7f.1 and 127.1 are all 127.0.0.1.
func parseIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 1 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) == 0 || len(parts) > 4 {
		return netip.Addr{}, false
	}
	nums := make([]uint64, len(parts))
	for i, s := range parts {
		n, ok := parseIPv4Part(s)
		if !ok {
			return netip.Addr{}, false
		}
		nums[i] = n
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 255 {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

func parseIPv4Part(s string) (uint64, bool) {
	if s == "" {
		return 0, false
	}
	base := 10
	switch {
	case len(s) >= 2 && (s[:2] == "0x" || s[:2] == "0X"):
		s, base = s[2:], 16
		if s == "" {
			return 0, true // WHATWG: "0x" alone is zero
		}
		if !isHex(s) {
			return 0, false
		}
	case len(s) >= 2 && s[0] == '0':
		s, base = s[1:], 8
	}
	if base != 16 && !isDigits(s) {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	if err != nil {
		return 0, false
	}
	return n, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return s != ""
}
