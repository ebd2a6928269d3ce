// Package cluster is membership and placement: one protoactor-go actor
// system with remote and cluster, membership from hashicorp/memberlist
// (cluster/memberlist), the delivery partitions' owners, and where each
// grain runs.
//
// # Where it sits
//
//	cmd/hookline ─▶ node ─▶ cluster ─▶ cluster/memberlist
//	                  │
//	                  └─▶ actors (grains), projections, control
//
// The node package builds the grain kinds and calls [Start]; the control
// API and the actors reach grains with [Node.Request] (a command, with an
// answer), [Node.Tell] and [Node.TellLocal] (hints). The node's own
// traffic between members (a search's part, a reconcile's part) goes to
// named services: [Node.Serve] and [Node.Receive] start one on this member,
// [Node.Ask] and [Node.Send] reach it on another.
//
// # Membership and placement
//
// memberlist decides who is alive; on every join, leave or update the
// provider hands its live member list to protoactor, which publishes a new
// topology. The delivery work is split into events.Partitions partitions
// by endpoint; each partition's owner is chosen by rendezvous hashing over
// the members (partitions.go), and [Config.OnPartitions] tells the node
// which partitions it owns now. Endpoint grains ([Config.PartitionedKind])
// run on their partition's owner; other grains on the member rendezvous
// hashing picks for their identity. A member's placement actor activates
// the grains it owns on their first request and stops those a new topology
// gives to another member. Fencing by expected revision (package events)
// keeps a stale activation from writing. A node without seeds is a cluster
// of one.
//
// # Requests
//
// [Node.Request] finds the grain's PID itself and makes at most three
// attempts, each bounded by [Config.RequestTimeout]; an attempt that may
// have reached the grain is repeated only when that is safe (a request id,
// or a command that changes nothing), so a command never runs twice. It
// returns [ErrUnavailable] when no attempt is left and [ErrStopped] once
// [Node.Stop] has begun.
//
// # The cluster's own traffic
//
// With [Config.Secrets] (HOOKLINE_CLUSTER_SECRET), every member derives a
// cluster CA from the secret and issues itself a certificate: the remote
// runs mutual TLS 1.3 and gossip is encrypted with a second derived key. A
// node without secrets may listen only on loopback, unless
// [Config.Insecure].
//
// [Node.Stop] leaves gracefully: memberlist gossips the leave, the
// placement actor stops this member's grains, and the remote stops.
//
// How protoactor-go is worked around (its request retries, its own gossip,
// its lookup's races) is in docs/architecture.md, "Cluster".
package cluster
