// Package tracing is W3C Trace Context (https://www.w3.org/TR/trace-context/)
// for webhook attempts: parsing and normalising the traceparent a producer
// gives at publish, and the traceparent each attempt carries.
//
// # Where it sits
//
// The control API (control) checks a publish's traceparent and
// tracestate with [Parse] and [CheckState] and records them, normalised,
// in the EventPublished. The endpoint grain (actors/endpoint) gives every
// attempt a context of its own with [ForAttempt]: the producer's trace id
// and a new span id, so that the attempt is a child of the producer's
// span, or, for an event published without one, the trace id of the
// event's own ([EventTraceID]), the same for every attempt of every
// delivery of that event. The attempt sends it as the traceparent header
// (attempt) and records it in its lineage (Attempt.trace), so a
// receiver that logs the header finds Hookline's record of the attempt.
// Exporting spans (tracing/otlp) is separate and optional.
//
// The package has no dependencies beyond the standard library; its values
// are plain and safe for concurrent use.
package tracing
