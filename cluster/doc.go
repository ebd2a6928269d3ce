// Package cluster is the Hookline node: one protoactor-go actor system with
// remote and cluster, membership from hashicorp/memberlist, the grain kinds
// this process hosts, and its start and stop.
//
// # Where it sits
//
//	cmd/hookline ─▶ cluster ─▶ actors (endpoint, tenant grains) / projections
//	                   │
//	                   └─▶ cluster/memberlist (the membership provider)
//
// cmd builds the grain kinds from the actors packages, calls [Start] and
// joins [Node.Run] into its errgroup; the control API and the actors send
// to grains with [Node.Request]. Imports point one way: cluster imports
// actors and projections, never the reverse.
//
// # How membership flows
//
// memberlist gossips over UDP and TCP and decides who is alive. Each node's
// memberlist metadata carries its protoactor member: id, remote address
// (host:port) and kinds. On every join, leave or update, the provider in
// cluster/memberlist reads memberlist's full live member list and hands it
// to protoactor's MemberList.UpdateClusterTopology, which publishes the new
// topology. The node's identity lookup (node_placement.go) follows it:
// each grain identity is owned by the member that rendezvous hashing picks
// among the members hosting its kind; a member's placement actor activates
// the grains it owns on their first request and stops those a new topology
// gives to another member, so the next request re-activates them there.
// Fencing by expected revision (see package events) keeps a stale
// activation from writing. A node without seeds is a cluster of one.
//
// # Pitfalls, and how they are handled
//
//   - The cluster's RequestFuture applies its call options to a
//     package-global default configuration shared by all callers, and its
//     Request retries on timeouts (running a command twice) and reports a
//     dead letter and a timeout alike. [Node.Request] finds the PID itself
//     (the PID cache, or the identity lookup) and requests through the
//     actor system's root context, one attempt at a time.
//   - protoactor's request takes no context. Each attempt runs in its own
//     goroutine bounded by a timeout; Request returns when the caller's
//     context ends, and Stop waits for the attempts still running.
//   - The first request after a member died can go to the dead member (its
//     PIDs are cached, or failure detection has not removed it yet) and
//     time out. Request makes at most three attempts, each bounded by
//     Config.RequestTimeout, forgetting the cached PID between them; an
//     attempt that may have reached the grain is repeated only when that is
//     safe (a request id, or a command that changes nothing), so a command
//     never runs twice. A graceful leave is seen by the others within
//     milliseconds; a crash, within memberlist's suspicion time.
//   - protoactor's remote redials a lost member five times, two seconds
//     apart, which holds its endpoint writer for ten seconds and slows
//     shutdown. The node sets it to one try: membership decides who is
//     alive.
//   - protoactor runs its own gossip and blocks, for good, a member whose
//     heartbeat it missed for 20 s, even while memberlist sees it alive;
//     that loop also reads the remote's block list without the lock it is
//     written under. The node leaves that loop idle (once a day, no
//     heartbeat expiry): memberlist is the one source of liveness.
//   - protoactor's endpoint reader checks the remote's block list without
//     its lock on every inbound connection (BlockList.IsBlocked), while a
//     member leaving writes it under the lock: a data race the race
//     detector can report in a node that accepted connections from a
//     member that then leaves. It is protoactor's; the in-process tests
//     stop the in-process node before the child members it talked to.
//   - protoactor's disthash lookup swaps its hash table without
//     synchronisation while requests read it, waits a fixed five seconds
//     for activations, and can crash its placement actor on an unknown
//     terminated PID. The node's lookup is disthash with those fixed.
//   - protoactor logs every activation and topology change at info level.
//     Its logger is the node's, at warn level and above.
//   - protoactor reports start failures (port in use) by panicking; Start
//     turns them into errors and releases what was started.
//   - Cluster.StartMember pauses a fixed second and Cluster.Shutdown two
//     seconds (for hand-over); Start and Stop include them.
//   - protoactor's remote.Start sets gRPC's global logger on every start,
//     a data race with any other node's gRPC goroutines in the same
//     process. Run one node per process; the multi-node tests start the
//     other nodes as child processes.
//   - protoactor registers protobuf files named actor.proto, cluster.proto
//     and so on; Hookline's own files live under hookline/v1/, so the names
//     never clash.
//
// # The cluster's own traffic
//
// The cluster port (protoactor's remote) carries grain commands, among them
// IssueKey and Rotate, whose answers hold secrets, so members authenticate
// each other and nothing travels in clear (credentials.go). From the
// cluster's shared secrets (Config.Secrets, HOOKLINE_CLUSTER_SECRET) every
// member derives a cluster CA (an ed25519 key by HKDF, and a self-signed
// certificate) and at start issues itself a certificate for a fresh key,
// signed by it; the remote runs TLS 1.3 with client certificates required
// and checked against the CAs, both ways. A second derived key encrypts
// and authenticates gossip (memberlist's keyring), which refuses packets in
// clear. A process without the secret cannot join, cannot complete a
// handshake on the cluster port, and so cannot send a grain a message.
// protoactor's remote takes the TLS credentials as its gRPC server and dial
// options (remote.WithServerOptions, remote.WithDialOptions). A node
// without secrets may listen only on loopback, unless Config.Insecure.
//
// # Stopping
//
// [Node.Stop] runs protoactor's graceful Cluster.Shutdown: memberlist
// gossips the leave (bounded by memberlist.Timing.LeaveTimeout) and stops,
// the placement actor stops this member's grains, and after the hand-over
// pause the remote stops. It returns within about 2.5 s on loopback.
package cluster
