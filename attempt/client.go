package attempt

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"syscall"
	"time"
)

// Egress defaults and limits.
const (
	DefaultConnectTimeout         = 5 * time.Second
	DefaultTLSHandshakeTimeout    = 5 * time.Second
	DefaultResponseHeaderTimeout  = 10 * time.Second
	DefaultAttemptTimeout         = 15 * time.Second
	MaxAttemptTimeout             = 30 * time.Second
	DefaultMaxResponseHeaderBytes = 16 << 10
	DefaultMaxBodyBytes           = 64 << 10
	DefaultPrefixBytes            = 256
	// DefaultMaxIdleConnsPerHost keeps as many idle connections to one
	// host as the node has attempt slots by default (dispatch.DefaultSlots):
	// a busy endpoint reuses its connections instead of dialing (and
	// leaving TIME_WAIT sockets) for most attempts.
	DefaultMaxIdleConnsPerHost = 256

	// UserAgent is sent with every attempt.
	UserAgent = "Hookline/1"
)

// ClientConfig configures the egress client. The zero value is the
// production configuration: the zero [Policy], no proxy, and the default
// caps above.
type ClientConfig struct {
	// Policy is checked before every request and on every address dialed.
	// Nil means the zero Policy (production rules, system resolver).
	Policy *Policy

	// Proxy is an explicit egress proxy (for example smokescreen). Nil
	// means none; the environment (HTTPS_PROXY…) is never consulted. With
	// a proxy, the client checks the URL and its DNS answers before each
	// request, but connects only to the proxy, which must enforce the same
	// rules on what it dials.
	Proxy *url.URL

	ConnectTimeout        time.Duration // TCP connect; 0 means 5 s
	TLSHandshakeTimeout   time.Duration // 0 means 5 s
	ResponseHeaderTimeout time.Duration // from request written to headers read; 0 means 10 s
	// Timeout bounds a whole attempt when the Request sets none; 0 means
	// 15 s. No attempt runs longer than MaxAttemptTimeout (30 s).
	Timeout time.Duration

	MaxResponseHeaderBytes int64 // 0 means 16 KiB
	MaxBodyBytes           int64 // response bytes read and digested; 0 means 64 KiB
	PrefixBytes            int   // response bytes kept; 0 means 256

	// MaxIdleConnsPerHost bounds the idle connections kept per host:port;
	// 0 means DefaultMaxIdleConnsPerHost.
	MaxIdleConnsPerHost int

	// TLSConfig is the base TLS configuration (tests set RootCAs). Nil
	// means the system roots with TLS 1.2 at least.
	TLSConfig *tls.Config
}

// Validate reports negative durations or sizes and timeouts above the
// maximum.
func (c ClientConfig) Validate() error {
	for _, d := range []time.Duration{c.ConnectTimeout, c.TLSHandshakeTimeout, c.ResponseHeaderTimeout, c.Timeout} {
		if d < 0 {
			return errors.New("attempt: client timeouts must not be negative")
		}
	}
	if c.Timeout > MaxAttemptTimeout {
		return fmt.Errorf("attempt: client timeout %v is above the maximum %v", c.Timeout, MaxAttemptTimeout)
	}
	if c.MaxResponseHeaderBytes < 0 || c.MaxBodyBytes < 0 || c.PrefixBytes < 0 || c.MaxIdleConnsPerHost < 0 {
		return errors.New("attempt: client sizes must not be negative")
	}
	if c.Proxy != nil && (c.Proxy.Scheme == "" || c.Proxy.Host == "") {
		return errors.New("attempt: egress proxy must be an absolute URL")
	}
	return nil
}

func (c ClientConfig) withDefaults() ClientConfig {
	if c.Policy == nil {
		c.Policy = &Policy{}
	}
	setDefault(&c.ConnectTimeout, DefaultConnectTimeout)
	setDefault(&c.TLSHandshakeTimeout, DefaultTLSHandshakeTimeout)
	setDefault(&c.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	setDefault(&c.Timeout, DefaultAttemptTimeout)
	setDefault(&c.MaxResponseHeaderBytes, DefaultMaxResponseHeaderBytes)
	setDefault(&c.MaxBodyBytes, DefaultMaxBodyBytes)
	setDefault(&c.PrefixBytes, DefaultPrefixBytes)
	setDefault(&c.MaxIdleConnsPerHost, DefaultMaxIdleConnsPerHost)
	return c
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// Client is the egress HTTP client of attempts. It is safe for concurrent
// use; create one per process and reuse it, so connections are pooled.
type Client struct {
	cfg       ClientConfig
	policy    *Policy
	transport *http.Transport
	http      *http.Client
	tokens    tokens

	nats natsConns
	amqp amqpConns

	tlsClients idleCache[*http.Client] // by ClientTLS.Key
}

// NewClient returns a client for cfg. It panics if cfg.Validate fails: the
// configuration is fixed at start-up, so that is a programmer error.
func NewClient(cfg ClientConfig) *Client {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	cfg = cfg.withDefaults()
	c := &Client{cfg: cfg, policy: cfg.Policy}
	c.tlsClients.drop = (*http.Client).CloseIdleConnections
	c.amqp.cache.drop = (*amqpConn).close
	c.nats.cache.drop = func(n natsConn) { n.nc.Close() }

	tlsConf := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSConfig != nil {
		tlsConf = cfg.TLSConfig.Clone()
		if tlsConf.MinVersion == 0 {
			tlsConf.MinVersion = tls.VersionTLS12
		}
	}

	c.transport = &http.Transport{
		Proxy:                  nil, // never from the environment
		DialContext:            c.dialContext,
		TLSClientConfig:        tlsConf,
		TLSHandshakeTimeout:    cfg.TLSHandshakeTimeout,
		ResponseHeaderTimeout:  cfg.ResponseHeaderTimeout,
		MaxResponseHeaderBytes: cfg.MaxResponseHeaderBytes,
		DisableCompression:     true,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
	}
	if cfg.Proxy != nil {
		// The proxy is operator configuration, not a customer URL: dial it
		// without the policy.
		c.transport.Proxy = http.ProxyURL(cfg.Proxy)
		d := &net.Dialer{Timeout: cfg.ConnectTimeout}
		c.transport.DialContext = d.DialContext
	}
	c.http = &http.Client{
		Transport: c.transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // 3xx is an answer, never followed
		},
	}
	return c
}

// CloseIdleConnections closes pooled connections that are not in use
// (those of client certificates' transports too), and the connections to
// brokers.
func (c *Client) CloseIdleConnections() {
	c.transport.CloseIdleConnections()
	c.tlsClients.each((*http.Client).CloseIdleConnections)
	c.amqp.cache.close(c.amqp.cache.all())
	c.nats.cache.close(c.nats.cache.all())
}

// dialContext resolves the host through the policy's resolver, requires
// every address to pass the policy, and dials the checked addresses
// themselves (pinning), so a second DNS lookup cannot swap the target.
// The dialer's Control re-checks the address actually connected to.
func (c *Client) dialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, blocked(RuleURL, "cannot split %q into host and port", address)
	}
	n, err := strconv.ParseUint(portText, 10, 16)
	if err != nil || n == 0 {
		return nil, blocked(RulePort, "port %q is not a valid port number", portText)
	}
	port := uint16(n)
	if !c.policy.AllowPrivate && !slices.Contains(c.policy.ports(), port) && !(ctx.Value(brokerDial{}) != nil && (port == DefaultNATSPort || port == DefaultAMQPPort || port == DefaultAMQPSPort)) {
		return nil, blocked(RulePort, "port %d is not allowed (allowed: %s); use https on an allowed port", port, joinPorts(c.policy.ports()))
	}

	var addrs []netip.Addr
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := c.policy.CheckAddr(addr); err != nil {
			return nil, err
		}
		addrs = []netip.Addr{addr}
	} else if addrs, err = c.policy.resolve(ctx, host); err != nil {
		return nil, err
	}

	d := &net.Dialer{Timeout: c.cfg.ConnectTimeout, Control: c.control}
	var first error
	for _, addr := range addrs {
		conn, err := d.DialContext(ctx, network, netip.AddrPortFrom(addr, port).String())
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, first
}

// control runs just before connect(2) on the socket, with the address the
// kernel is about to connect to.
func (c *Client) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return blocked(RuleAddress, "cannot parse dial address %q", address)
	}
	return c.policy.CheckAddr(ap.Addr())
}
