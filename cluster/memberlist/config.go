package memberlist

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	hml "github.com/hashicorp/memberlist"
)

// AnyPort asks the operating system for a free port. The port chosen is
// known once the provider has started; read it with [Provider.Addr].
const AnyPort = -1

// Defaults applied to the zero value of [Config] and [Timing].
const (
	DefaultClusterName       = "hookline"
	DefaultHost              = "127.0.0.1"
	DefaultPort              = 7946 // memberlist's customary port, TCP and UDP
	DefaultLeaveTimeout      = 2 * time.Second
	DefaultJoinRetryInterval = time.Second

	// Failure detection: a member that stops answering is probed within
	// about two probe intervals, suspected after one more, and declared
	// dead DefaultSuspicionMult probe intervals later: about 1.2 s in
	// all, under 1.5 s at worst, so that its partitions are served again
	// within 2 s. A live member that is suspected refutes it at once; one
	// that cannot answer for over half a second (a stalled process) is
	// taken for dead, and its partitions move, safely (see
	// docs/operations.md).
	DefaultProbeInterval  = 300 * time.Millisecond
	DefaultProbeTimeout   = 200 * time.Millisecond
	DefaultGossipInterval = 100 * time.Millisecond
	DefaultSuspicionMult  = 2
)

// Config configures a [Provider]. The zero value is a usable configuration
// for a cluster of one on loopback: every zero field takes the default named
// in its comment. Validate reports the first field that cannot work.
type Config struct {
	// ClusterName keeps clusters apart: it labels every gossip packet and is
	// carried in each node's metadata, and nodes of another cluster are
	// ignored. Default [DefaultClusterName].
	ClusterName string

	// Host is the address gossip binds to and advertises to the other
	// nodes, so it must be reachable by them: an unspecified address such
	// as 0.0.0.0 is rejected. Default [DefaultHost].
	Host string

	// Port is the gossip port, used for both TCP and UDP. Zero means
	// [DefaultPort]; [AnyPort] lets the system choose.
	Port int

	// Seeds are the gossip addresses (host:port) of nodes to join. None
	// means this node starts a cluster of its own. If no seed answers at
	// start, the node keeps trying in the background every
	// Timing.JoinRetryInterval until one does.
	Seeds []string

	// Keys encrypt and authenticate gossip (AES-GCM; each 16, 24 or 32
	// bytes): the first encrypts, every one decrypts, so a new key can be
	// rolled in before it becomes the first. With keys, a packet or stream
	// that no key opens, or that comes unencrypted, is dropped: a node
	// without the cluster's keys cannot join or read the membership. None
	// means gossip in clear, for loopback and trusted networks only.
	Keys [][]byte

	// Timing tunes failure detection and gossip; see [Timing].
	Timing Timing

	// Starting advertises the node as starting (StartingKind) until
	// Provider.Ready is called.
	Starting bool

	// OnMembers, when set, is given every member set handed to protoactor,
	// right after it: also those that differ from the last only in a
	// member's kinds (one that became ready), which protoactor's topology
	// events do not report. It must not block.
	OnMembers func([]*pcluster.Member)

	// Logger receives the provider's membership changes at info level and
	// memberlist's own log lines at debug level. Default slog.Default().
	Logger *slog.Logger
}

// Timing tunes memberlist. Zero fields take this package's defaults (probe
// every 300 ms with a 200 ms timeout, gossip every 100 ms, suspicion
// multiplier 2: a dead member is declared so in about 1.2 s) and, for the
// full state sync, memberlist's LAN default (30 s).
type Timing struct {
	ProbeInterval    time.Duration
	ProbeTimeout     time.Duration
	GossipInterval   time.Duration
	PushPullInterval time.Duration
	SuspicionMult    int

	// LeaveTimeout bounds how long a graceful shutdown waits for the leave
	// message to be gossiped. Default [DefaultLeaveTimeout].
	LeaveTimeout time.Duration

	// JoinRetryInterval is the pause between join attempts while no seed
	// has answered. Default [DefaultJoinRetryInterval].
	JoinRetryInterval time.Duration
}

// Validate reports whether c can start a provider. Each error names the
// field and how to fix it.
func (c Config) Validate() error {
	c = c.withDefaults()
	if ip := net.ParseIP(c.Host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("memberlist: Host %q is advertised to other nodes and cannot be unspecified: set this node's reachable address", c.Host)
	}
	if c.Port < AnyPort || c.Port > 65535 {
		return fmt.Errorf("memberlist: Port %d is out of range: use 1-65535, 0 for %d, or AnyPort", c.Port, DefaultPort)
	}
	if len(c.ClusterName) > hml.LabelMaxSize {
		return fmt.Errorf("memberlist: ClusterName is %d bytes long: use at most %d", len(c.ClusterName), hml.LabelMaxSize)
	}
	for i, s := range c.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("memberlist: Seeds[%d] %q is not host:port: %w", i, s, err)
		}
	}
	for i, k := range c.Keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return fmt.Errorf("memberlist: Keys[%d] is %d bytes: use 16, 24 or 32 (AES-128, -192, -256)", i, n)
		}
	}
	t := c.Timing
	if t.ProbeInterval < 0 || t.ProbeTimeout < 0 || t.GossipInterval < 0 || t.PushPullInterval < 0 ||
		t.LeaveTimeout < 0 || t.JoinRetryInterval < 0 || t.SuspicionMult < 0 {
		return errors.New("memberlist: Timing has a negative value: use zero for the default")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.ClusterName == "" {
		c.ClusterName = DefaultClusterName
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Timing.LeaveTimeout == 0 {
		c.Timing.LeaveTimeout = DefaultLeaveTimeout
	}
	if c.Timing.JoinRetryInterval == 0 {
		c.Timing.JoinRetryInterval = DefaultJoinRetryInterval
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// memberlistConfig builds memberlist's configuration for node name; c has
// its defaults applied and is valid.
func (c Config) memberlistConfig(name string) (*hml.Config, error) {
	mc := hml.DefaultLANConfig()
	mc.Name = name
	mc.Label = c.ClusterName
	mc.BindAddr = c.Host
	mc.AdvertiseAddr = c.Host
	port := c.Port
	if port == AnyPort {
		port = 0 // memberlist binds a free port and advertises it
	}
	mc.BindPort = port
	mc.AdvertisePort = port
	t := c.Timing
	mc.ProbeInterval = cmp.Or(t.ProbeInterval, DefaultProbeInterval)
	mc.ProbeTimeout = cmp.Or(t.ProbeTimeout, DefaultProbeTimeout)
	mc.GossipInterval = cmp.Or(t.GossipInterval, DefaultGossipInterval)
	mc.PushPullInterval = cmp.Or(t.PushPullInterval, mc.PushPullInterval)
	mc.SuspicionMult = cmp.Or(t.SuspicionMult, DefaultSuspicionMult)
	mc.Logger = newStdLogger(c.Logger)
	if len(c.Keys) > 0 {
		kr, err := hml.NewKeyring(c.Keys, c.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("memberlist: keys: %w", err)
		}
		mc.Keyring = kr
		// Refuse what comes in clear, and never send in clear: a node
		// without the keys is not half a member.
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	return mc, nil
}

func joinHostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
