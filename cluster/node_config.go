package cluster

import (
	"fmt"
	"log/slog"
	"net"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"

	"github.com/hookline/hookline/cluster/memberlist"
	"github.com/hookline/hookline/events"
)

// AnyPort asks the operating system for a free port, for Port or
// GossipPort. The ports chosen are known once the node has started: read
// them with [Node.Address] and [Node.GossipAddress].
const AnyPort = -1

// Defaults applied to the zero value of [Config].
const (
	DefaultName           = "hookline"
	DefaultHost           = "127.0.0.1"
	DefaultPort           = 7980                   // protoactor remote (gRPC)
	DefaultGossipPort     = memberlist.DefaultPort // 7946, TCP and UDP
	DefaultRequestTimeout = 2 * time.Second
)

// Config configures a [Node]. The zero value starts a cluster of one on
// loopback with no grain kinds: every zero field takes the default named in
// its comment. Validate reports the first field that cannot work and how to
// fix it; [Start] calls it.
type Config struct {
	// Name is the cluster's name. Nodes only form a cluster with nodes of
	// the same name. Default [DefaultName].
	Name string

	// Host is the address protoactor's remote listens on and advertises to
	// the other members, so it must be reachable by them: an unspecified
	// address such as 0.0.0.0 is rejected. Default [DefaultHost].
	Host string

	// Port is protoactor's remote (gRPC) port. Zero means [DefaultPort];
	// [AnyPort] lets the system choose.
	Port int

	// GossipHost is the address memberlist binds to and advertises.
	// Default Host.
	GossipHost string

	// GossipPort is memberlist's port (TCP and UDP). Zero means
	// [DefaultGossipPort]; [AnyPort] lets the system choose.
	GossipPort int

	// Seeds are gossip addresses (host:port) of other nodes to join. None
	// means this node is a cluster of one until others join it.
	Seeds []string

	// Kinds are the grain kinds this node hosts, built with
	// protoactor's cluster.NewKind. A node may host none and still send
	// requests to kinds hosted elsewhere.
	Kinds []*pcluster.Kind

	// PartitionedKind is the grain kind placed by delivery partition: its
	// grains run on the member that owns their identity's partition
	// (events.PartitionOf). Empty places every kind by its identity. A
	// grain of it whose partition another member owns now receives
	// [Retire] and must stop itself, at once or once it has finished what
	// it cannot hand over (a minute at most).
	PartitionedKind string

	// Owners, when set, names the member that owns each delivery
	// partition now (the node's partition table): the grains of
	// PartitionedKind are placed on it, and a member activates such a grain
	// only while Owners names it. Nil places them on each partition's
	// target in the [Ranking].
	Owners PartitionOwners

	// OnTopology, when set, is told the [Ranking] of the members hosting
	// PartitionedKind, at start and on every change of the member set. It
	// is called from protoactor's event stream and must not block.
	OnTopology func(*Ranking)

	// Warming starts the member as starting: the others (and it) place the
	// grains of kinds other than PartitionedKind on members that are
	// ready while there is one, until [Node.Ready] is called. A member
	// that joins then hosts those grains (a tenant's) only once it can
	// answer them promptly, not while it starts and catches up. Without
	// it, a member is ready from its start.
	Warming bool

	// RequestTimeout bounds one attempt of [Node.Request]; a request makes
	// at most three attempts, each also bounded by the caller's context.
	// Default [DefaultRequestTimeout].
	RequestTimeout time.Duration

	// Gossip tunes memberlist's failure detection; zero fields take
	// memberlist's LAN defaults. Tests shorten them.
	Gossip memberlist.Timing

	// Secrets are the cluster's shared secrets (at least [MinSecretSize]
	// random bytes each; [ParseSecrets] reads HOOKLINE_CLUSTER_SECRET), the
	// first current. From them every member derives a cluster CA, with
	// which the remote runs mutual TLS, and the key that encrypts gossip:
	// a process without a secret cannot join, nor send a grain a message.
	// Required when Host or GossipHost is reachable from other hosts,
	// unless Insecure. See credentials.go.
	Secrets [][]byte

	// Insecure lets a node without Secrets listen for the cluster on
	// addresses other hosts can reach: anyone who reaches them can command
	// its grains (issue API keys, rotate secrets). Development on a trusted
	// network only; the node says so loudly at start.
	Insecure bool

	// Logger receives the node's logs. protoactor's own logs go to it at
	// warn level and above only; memberlist's at debug. Default
	// slog.Default().
	Logger *slog.Logger
}

// PartitionOwners names the member that owns each delivery partition now.
// It must be safe for concurrent use and must not block.
type PartitionOwners interface {
	// Owner returns the owner's address; "" when no member owns p.
	Owner(p events.Partition) string
}

// Validate reports whether c can start a node. Each error names the field
// and the fix.
func (c Config) Validate() error {
	c = c.withDefaults()
	if ip := net.ParseIP(c.Host); ip != nil && ip.IsUnspecified() {
		return fmt.Errorf("cluster: Host %q is advertised to other members and cannot be unspecified: set this node's reachable address", c.Host)
	}
	if err := checkPort("Port", c.Port, DefaultPort); err != nil {
		return err
	}
	if err := checkPort("GossipPort", c.GossipPort, DefaultGossipPort); err != nil {
		return err
	}
	if len(c.Secrets) == 0 && !c.Insecure {
		for _, h := range []struct{ field, host string }{{"Host", c.Host}, {"GossipHost", c.GossipHost}} {
			if !loopbackHost(h.host) {
				return fmt.Errorf("cluster: %s %q is reachable from other hosts without a cluster secret: set HOOKLINE_CLUSTER_SECRET, the same on every node (or Insecure, --insecure-cluster, on a trusted development network)", h.field, h.host)
			}
		}
	}
	for i, sec := range c.Secrets {
		if len(sec) < MinSecretSize {
			return fmt.Errorf("cluster: Secrets[%d] is %d bytes: use at least %d random bytes", i, len(sec), MinSecretSize)
		}
	}
	if c.RequestTimeout < 0 {
		return fmt.Errorf("cluster: RequestTimeout %v is negative: use a positive duration, or zero for %v", c.RequestTimeout, DefaultRequestTimeout)
	}
	seen := make(map[string]bool, len(c.Kinds))
	for i, k := range c.Kinds {
		switch {
		case k == nil:
			return fmt.Errorf("cluster: Kinds[%d] is nil: build kinds with protoactor's cluster.NewKind", i)
		case k.Kind == "":
			return fmt.Errorf("cluster: Kinds[%d] has no name: give cluster.NewKind a kind name", i)
		case k.Props == nil:
			return fmt.Errorf("cluster: Kinds[%d] (%s) has no props: give cluster.NewKind the grain's props", i, k.Kind)
		case k.Kind == pcluster.TopicActorKind:
			return fmt.Errorf("cluster: Kinds[%d] uses the name %q, reserved by protoactor: rename the kind", i, k.Kind)
		case seen[k.Kind]:
			return fmt.Errorf("cluster: Kinds[%d] repeats kind %q: list each kind once", i, k.Kind)
		}
		seen[k.Kind] = true
	}
	if err := c.gossipConfig().Validate(); err != nil {
		return fmt.Errorf("cluster: gossip: %w", err)
	}
	return nil
}

func checkPort(field string, port, def int) error {
	if port < AnyPort || port > 65535 {
		return fmt.Errorf("cluster: %s %d is out of range: use 1-65535, 0 for %d, or AnyPort", field, port, def)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.Host == "" {
		c.Host = DefaultHost
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.GossipHost == "" {
		c.GossipHost = c.Host
	}
	if c.GossipPort == 0 {
		c.GossipPort = DefaultGossipPort
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// gossipConfig is the memberlist provider's configuration; c has its
// defaults applied.
func (c Config) gossipConfig() memberlist.Config {
	port := c.GossipPort
	if port == AnyPort {
		port = memberlist.AnyPort
	}
	return memberlist.Config{
		ClusterName: c.Name,
		Host:        c.GossipHost,
		Port:        port,
		Seeds:       c.Seeds,
		Timing:      c.Gossip,
		Starting:    c.Warming,
		Logger:      c.Logger.With(slog.String("component", "memberlist")),
	}
}

// loopbackHost reports whether host (a name or an address) is reachable
// from this host only.
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// remotePort is the port given to protoactor's remote: zero there means a
// free port.
func (c Config) remotePort() int {
	if c.Port == AnyPort {
		return 0
	}
	return c.Port
}
