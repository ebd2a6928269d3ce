// Package portal keeps the tenant portal's tokens: short-lived bearer
// tokens that open one tenant's portal with some capabilities (read only;
// manage endpoints; replay), issued by the producer's backend and handed
// to its customer's browser. It sits beside the registry projection:
//
//	control (IssuePortalToken) ─▶ events.Log (portal-{token_id}: PortalTokenIssued, PortalTokenRevoked)
//	                                  │
//	control (authenticate) ◀── Tokens ◀┘ (a projection on every node)
//
// A token is "hlp_" and 32 random bytes; only its SHA-256 reaches the log,
// so the log and the projection hold nothing that opens a portal. A token
// is looked up by its hash (the comparison of secrets happens on hashes,
// like the tenants' API keys), and is refused once expired or revoked.
// Expired tokens are forgotten (each issue prunes a few, by the issue's
// own time), so a node keeps about the tokens of the last MaxTTL, however
// many sessions were opened; a tenant's list is read a page at a time.
// Tokens are not records of any delivery partition: every node applies
// them all, as it does the registry.
package portal
