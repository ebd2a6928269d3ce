// Package dispatch is the node's fair dispatcher: it shares the node's
// attempt slots (a configured total) among tenants, so that one tenant's
// slow or hanging endpoints cannot delay another tenant's deliveries.
//
// # Where it sits
//
//	projections/due ─▶ endpoint grain ─Acquire─▶ Dispatcher ─grant─▶ endpoint grain ─▶ attempt
//
// Every endpoint grain on the node asks the one [Dispatcher] for a slot
// before each attempt ([Dispatcher.Acquire]) and gives it back when the
// attempt has an answer ([Dispatcher.Release]); a grain that stops gives
// back everything it holds and drops what it waits for
// ([Dispatcher.Leave]). Grants come back through a callback, which the
// grain turns into a message to itself: a grain never blocks on the
// dispatcher.
//
// # Policy
//
//   - Tenants are served by deficit round robin: each visit adds the
//     tenant's weight (from its quota, default 1) to its deficit, and each
//     slot costs one, so over time tenants get slots in proportion to their
//     weights, whatever the number of endpoints or requests each has.
//   - Within a tenant, its endpoints are served round robin.
//   - New deliveries come ahead of retries. Retries may take a slot only
//     while the oldest new delivery that could take it (its tenant below
//     the cap) is younger than the objective (default 1 s), or when none
//     waits. While such new work is late, every free slot goes to it; new
//     work of a tenant at its cap holds nobody's retries back.
//   - No tenant holds more than TenantCap slots (default three quarters of
//     the node): slots are not preempted, so a tenant whose endpoints all
//     hang until their attempt timeout still leaves the rest of the node to
//     the others.
//   - A tenant's cap shrinks with the share of its recent attempts that
//     timed out ([Dispatcher.Release] is told), down to HangFloor (a
//     sixteenth of the node) when all of them do, and comes back as its
//     attempts are answered: its hanging attempts serve nobody, and they
//     would time out together and start again together, in bursts that the
//     other tenants' attempts of that moment wait behind. The share fades
//     with time (HangHalfLife, 15 min) and outlives the moments when the
//     tenant holds and waits for nothing, so a tenant whose hanging
//     attempts come in waves starts each wave near the floor.
//
// The dispatcher is memory only: on a restart the grains ask again.
package dispatch
