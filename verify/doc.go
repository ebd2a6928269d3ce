// Package verify checks the signatures that Hookline puts on the webhooks it
// delivers. It is meant for customers to import in their receivers: it
// depends on the standard library only and follows Standard Webhooks
// (https://www.standardwebhooks.com), so any conforming sender can be
// verified with it too.
//
// A delivery carries three headers: webhook-id (the delivery id, the same on
// every retry: dedupe on it), webhook-timestamp (Unix seconds of this
// attempt) and webhook-signature (one or more space-separated "v1,<base64
// HMAC-SHA256>" and, when enabled, "v1a,<base64 ed25519>" signatures of
// id.timestamp.body). [Verifier.Verify] accepts a request when the timestamp
// is within the tolerance and any one signature matches any one key, so
// receivers keep working through a secret rotation.
//
// Verify the raw body bytes as received, before any JSON decoding.
//
// In Hookline's flow this package sits outside the server, on the customer's
// side of attempt, which produces the signatures.
package verify
