// Package attempt makes one HTTP delivery attempt: it signs the stored payload
// bytes, POSTs them through the egress client and classifies the answer.
//
// It sits at the end of the delivery path: an
// endpoint grain pulls a due delivery, runs [Client.Do] off its mailbox, and
// appends the returned [Outcome] to the delivery stream. The package holds no
// actor code and writes no events; it is plain Go that the grain calls.
//
// The pieces, in the order an attempt uses them:
//
//   - [Policy] is the SSRF policy for customer URLs. [Policy.CheckURL] runs at
//     registration and stores the normalised URL; [Policy.CheckAddr] runs on
//     every address that the egress client is about to dial.
//   - [Client] is the egress HTTP client: no proxy from the environment, every
//     resolved address checked and pinned, no redirects, hard caps on time and
//     bytes.
//   - [Sign] computes the Standard Webhooks signature header; [NewSecret],
//     [ParseSecret], [NewSigningKey] and [PublicKey] manage the keys.
//   - [Client.Do] sends one attempt and returns an [Outcome] whose [Class] is
//     [Success], [Retryable] or [Permanent].
//   - [Schedule] chooses when the next automatic attempt runs.
//
// Customers verify what this package signs with the top-level package verify.
package attempt
