// Package filter is the payload filter of an endpoint: a CEL expression
// (https://cel.dev) over one event, checked when the endpoint is created or
// changed and evaluated when a publish plans the event's deliveries. It is
// the only importer of github.com/google/cel-go.
//
//	control (create, update) ─▶ Compile: a position-naming error, a cost check
//	control (publish)        ─▶ Cache.Get(endpoint, config version) ─▶ Filter.Match(Input)
//	control (routing)        ─▶ Filter.Explain(Input): the verdict and the values it saw
//
// # The variables
//
//	type            string               the event type, "invoice.paid"
//	id              string               the event id the producer chose
//	data            dyn                  the payload parsed as JSON (null when it is not JSON)
//	headers         map(string, string)  the headers the producer set at publish, names in lower case
//	schema_version  string
//	object_id       string
//	content_type    string               "application/json" unless the producer said otherwise
//	occurred_at     timestamp
//
// JSON numbers are doubles, and compare with integers as numbers
// (data.amount > 100, data.count == 3); integers beyond 2^53 lose
// precision. Examples:
//
//	data.amount >= 1000 && data.currency == "EUR"
//	type.startsWith("invoice.") && headers["x-region"] == "eu"
//	data.items.exists(i, i.sku == "GIFT-CARD")
//	has(data.customer.vip) && data.customer.vip
//
// # What does not pass
//
// A filter passes an event when it evaluates to true. False, any other
// value, and an error (a field the event lacks: use has(); a type
// mismatch; the cost limit) all count as not passed, so no event reaches an
// endpoint whose filter could not vouch for it; the error is kept with the
// verdict, which the plan records.
//
// # Cost
//
// No filter can be slow. At Compile, an expression is refused when it is
// longer than [MaxLen], nests deeper than the parser allows, or when CEL's
// cost estimate for an event whose lists, maps and strings hold up to
// [SizeHint] entries exceeds [CostLimit] (nested loops over the event's
// lists are refused). At evaluation, every run stops at [CostLimit] units,
// whatever the event, and counts as not passed with the error "cost limit
// exceeded". Measured in BenchmarkMatch: see the README's Filters section.
package filter
