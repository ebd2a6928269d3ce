// Package memberlist is protoactor-go's cluster.ClusterProvider on
// hashicorp/memberlist, which protoactor-go does not ship. It is the only
// importer of hashicorp/memberlist; package cluster (the node) creates it
// and hands it to protoactor, which calls StartMember and Shutdown.
//
// # How membership flows
//
//	memberlist gossip ─▶ view (copies) ─▶ ChannelEventDelegate ─▶ drain goroutine ─(kick)─▶
//	publish goroutine: view's live nodes ─▶ decode meta ─▶ MemberList.UpdateClusterTopology
//
// Each node's memberlist Meta carries its protoactor member as compact JSON
// (cluster name, member id, remote host and port, kinds, client flag),
// under memberlist's 512-byte limit. On every join, leave or update the
// provider hands protoactor the FULL live member set, never a delta:
// protoactor computes joined and left itself, and a lost event cannot leave
// a stale member behind.
//
// # Pitfalls, and how they are handled
//
//   - memberlist calls event delegates while holding its node lock, so a
//     synchronous delegate that reads Members() deadlocks. The provider uses
//     memberlist's ChannelEventDelegate; a drain goroutine empties the
//     channel and only signals, so memberlist never waits on it, and a
//     separate publish goroutine reads the live nodes and updates protoactor.
//   - memberlist's Members() returns its internal node records, which it
//     rewrites in place when a node gossips new metadata (a member that
//     says it is ready): reading them is a data race. The provider keeps
//     its own copies instead, taken by an event delegate (under
//     memberlist's lock) in front of the channel delegate.
//     Signals coalesce: a burst of events gives one update with the latest
//     list.
//   - Only the publish goroutine calls UpdateClusterTopology, so topologies
//     reach protoactor in the order they were read.
//   - On Shutdown the provider stops publishing first (this node's own view,
//     which soon excludes itself, must not re-place grains), gossips the
//     leave bounded by Timing.LeaveTimeout, stops memberlist, and only then
//     stops draining, so memberlist never blocks on a full channel while it
//     leaves.
//   - memberlist needs a concrete port to advertise; [AnyPort] binds a free
//     one, and [Provider.Addr] tells which.
//   - memberlist logs through a *log.Logger; its lines go to slog at debug
//     level with their level as an attribute. The provider logs joins and
//     leaves itself at info level.
//   - Seeds that do not answer at start are retried in the background, so
//     nodes that start together in any order still meet.
//   - Nodes of another cluster are kept apart by memberlist's label (the
//     cluster name) and by the cluster name in the metadata. Neither is a
//     secret: with Config.Keys, gossip is encrypted and authenticated
//     (memberlist's keyring, AES-GCM) and clear packets are refused
//     (GossipVerifyIncoming and -Outgoing), so a node without the keys can
//     neither join nor read the membership.
package memberlist
