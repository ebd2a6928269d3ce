// Package faults injects the failures that reconciliation and the
// acceptance run must survive, at the seams a node already has: the event
// log (an events.Log wrapper), the control API's plan of a publish
// (control.Config.PlanFault), the endpoint grain's attempter and due
// puller (wrappers of their interfaces), the wake hints and the
// projections' view of the log. It never edits the actors.
//
//	cmd/hookline serve --faults SPEC ─▶ node.Config.Faults ─▶ wrappers around the node's seams
//
// # Never by accident
//
// A node injects faults only when it is given a [Set]: by a test, which
// builds one, or by `hookline serve --faults SPEC`, an explicit flag with
// no environment variable behind it, which the node announces loudly at
// start. The zero Set, and a nil *Set, inject nothing; no wrapper is even
// installed then.
//
// # The faults
//
//	slow-append=DUR        every durable append takes DUR longer (a slow fsync)
//	unknown-every=N        every Nth append lands, then fails as if its
//	                       acknowledgement was lost (ErrUnknownOutcome)
//	kill-in-plan=N         the process is killed (SIGKILL) while the Nth append of
//	                       a multi-chunk plan (EventPublished and two or more
//	                       DeliveriesPlanned) is under way: before, during or
//	                       right after it lands
//	kill-after-2xx=N       the process is killed right after the Nth attempt
//	                       answered 2xx, before its outcome is recorded
//	plan-short=N           every Nth planned delivery is left out of its
//	                       publish's plan, silently (the answer and the log
//	                       agree; only a ledger of its own shows the loss)
//	corrupt-body=N         one byte of every Nth attempt's body is changed
//	                       before it is signed (the signature verifies; the
//	                       bytes are not the ones published)
//	skew-sequence=N        every Nth attempt of an ordered delivery carries a
//	                       webhook-sequence one higher than its own (a key's
//	                       receiver sees a gap that is none)
//	duplicate-due          each pull also hands out again what the endpoint's
//	                       previous pull handed out (the same delivery twice)
//	duplicate-wakes        every wake hint is sent twice
//	drop-wakes=SUBSTR      wake hints of endpoints whose id contains SUBSTR are
//	                       dropped, and so are the plans a publish hands their
//	                       grains (their due work waits for nobody)
//	hide=TYPE:N            the Nth record of type TYPE is hidden, once, from the
//	                       node's projections (they diverge from the log): until
//	                       they applied a batch without it (a restarted lane is
//	                       handed it again, hidden), not after (a rebuild heals)
//	lag-projections=D      the node's projections apply no record before it is
//	                       D old (they run behind the log)
//
// Separate them with commas: "slow-append=20ms,duplicate-due".
package faults
