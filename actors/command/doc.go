// Package command is what the tenant and endpoint grains share to carry
// out their commands: an event-sourced grain that owns one stream and
// handles the commands sent to it one at a time, in order.
//
// # Where it sits
//
//	control ─command─▶ actors/tenant, actors/endpoint ─▶ command.Core ─append─▶ events
//
// Each grain keeps a [Core] for its stream. The Core holds:
//
//   - the command queue: commands wait in arrival order while an I/O of
//     the grain is in flight ([Core.Push], [Core.Pop]); the I/O itself
//     (reading the stream, checking a URL, appending) runs off the mailbox
//     and comes back on the actor ([Core.IO]), so a grain never blocks in
//     Receive;
//   - the fenced append ([Core.Append]): the events of one command go to
//     the stream with the revision the grain last saw as the expected one,
//     under deterministic ids ([Encode]); a wrong revision means another
//     activation owns the stream now, and any other failure leaves the
//     grain unsure whether the append landed: either way it stops;
//   - the stop path ([Core.Stop], [Core.Passivate]): a grain that stops
//     answers every command it holds and every command already in its
//     mailbox, with a code that tells the caller to retry, before it is
//     gone;
//   - the request ids of the commands it carried out ([Done]), so that a
//     retried command gets its original answer instead of running twice;
//   - the domain errors a command is refused with ([Error]) and the rule
//     for grain ids ([ValidID]);
//   - what both grains read off their messages and streams: their identity
//     ([Identify]), a command's name ([Name]), a whole stream
//     ([ReadStream]).
//
// It imports events, the generated protobuf types and protoactor's actor
// and cluster packages; it knows nothing of tenants or endpoints.
package command
