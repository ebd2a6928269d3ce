package operational

import (
	"fmt"
	"slices"
	"strings"

	"github.com/hookline/hookline/eventtype"
)

// Prefix starts every operational event type. It is reserved: producers
// cannot publish types that start with it, and an endpoint subscribed to
// every type ("*") gets none of them (package eventtype's rule).
const Prefix = eventtype.Reserved

// All subscribes an endpoint to every operational event type, present and
// future.
const All = "hookline.*"

// The operational event types.
const (
	// EndpointPaused: an endpoint was paused, by a 410 Gone answer or by a
	// person (the API, the CLI, the portal).
	EndpointPaused = "hookline.endpoint.paused"
	// CircuitOpened: an endpoint's circuit breaker opened after consecutive
	// failures; attempts wait for its cool-down.
	CircuitOpened = "hookline.endpoint.circuit_opened"
	// CircuitClosed: a probe succeeded and the circuit closed again.
	CircuitClosed = "hookline.endpoint.circuit_closed"
	// DeliveryFailed: a delivery ended failed other than by using up its
	// attempts: a permanent answer (3xx, 4xx), its deadline passed before
	// an attempt, or its event left the log.
	DeliveryFailed = "hookline.delivery.failed"
	// AttemptsExhausted: a delivery ended failed because its automatic
	// retries were used up (the attempt limit or the 24 h deadline).
	AttemptsExhausted = "hookline.delivery.attempts_exhausted"
	// RecoveryFinished: a bulk recovery of an endpoint ended.
	RecoveryFinished = "hookline.recovery.finished"
	// RotationStarted: an endpoint got a new signing secret; the previous
	// one signs beside it until the overlap ends.
	RotationStarted = "hookline.secret.rotation_started"
	// RotationEnded: a previous signing secret was retired (its overlap
	// ended, or it was retired early): only the newer ones sign now.
	RotationEnded = "hookline.secret.rotation_ended"
)

// Type describes one operational event type.
type Type struct {
	Name        string
	Description string
	// Example is a payload of the type, as sent.
	Example []byte
}

// types lists every type, in the order the documentation shows them.
var types = []struct{ name, description string }{
	{EndpointPaused, "An endpoint was paused: it answered 410 Gone (reason gone, with the delivery that got it) or a person paused it (reason requested, with who). Its deliveries wait until it is resumed."},
	{CircuitOpened, "An endpoint's circuit breaker opened after consecutive failures: no attempt goes to it until the cool-down ends (until), then one probe."},
	{CircuitClosed, "A probe to the endpoint succeeded and its circuit closed: deliveries flow again."},
	{DeliveryFailed, "A delivery ended failed for good without using up its retries: a permanent answer (3xx, 4xx: reason permanent), its deadline passed before an attempt (expired), or its event left the log (event_gone). Manual replays and deliveries to a deleted endpoint do not send it."},
	{AttemptsExhausted, "A delivery ended failed because its automatic retries were used up (the endpoint's attempt limit or the 24 h deadline), with its last answer."},
	{RecoveryFinished, "A bulk recovery of an endpoint ended: done, stopped because the endpoint was paused, disabled or deleted (endpoint_not_active), or its recorded list could not be read back (list_missing); with how many deliveries it found and replayed."},
	{RotationStarted, "An endpoint got a new signing secret (version); the previous one (previous_version) keeps signing beside it until previous_expires_at."},
	{RotationEnded, "A previous signing secret of an endpoint was retired (its overlap ended, or it was retired early): receivers may drop it."},
}

// Types returns every operational event type with its description and an
// example payload, in a fixed order.
func Types() []Type {
	out := make([]Type, 0, len(types))
	for _, t := range types {
		out = append(out, Type{Name: t.name, Description: t.description, Example: example(t.name)})
	}
	return out
}

// Reserved reports whether an event type is in the operational namespace.
func Reserved(eventType string) bool { return strings.HasPrefix(eventType, Prefix) }

// Known reports whether eventType is an operational event type.
func Known(eventType string) bool {
	return slices.ContainsFunc(types, func(t struct{ name, description string }) bool { return t.name == eventType })
}

// Subscribes reports whether an endpoint with these event types receives
// operational events of eventType: it names the type, or [All]. An
// endpoint subscribed to every type ("*") does not: operational events go
// only to endpoints that ask for them.
func Subscribes(eventTypes []string, eventType string) bool {
	return slices.Contains(eventTypes, eventType) || slices.Contains(eventTypes, All)
}

// IsEndpoint reports whether an endpoint with these event types is an
// operational endpoint: it names an operational type.
func IsEndpoint(eventTypes []string) bool { return slices.ContainsFunc(eventTypes, Reserved) }

// CheckSubscription reports what is wrong with an endpoint's event types
// as far as operational types go: an operational endpoint names only
// operational types (known ones, or [All]), so that its own deliveries are
// only operational events, which never cause others (no loop).
func CheckSubscription(eventTypes []string) error {
	if !IsEndpoint(eventTypes) {
		return nil
	}
	for _, t := range eventTypes {
		switch {
		case !Reserved(t):
			return fmt.Errorf("mixes Hookline's operational event types (%s…) with %q: an operational endpoint receives only operational events; use another endpoint for %q", Prefix, t, t)
		case t != All && !Known(t):
			return fmt.Errorf("%q is not an operational event type; use %s or one of %s", t, All, strings.Join(names(), ", "))
		}
	}
	return nil
}

func names() []string {
	out := make([]string, len(types))
	for i, t := range types {
		out[i] = t.name
	}
	return out
}
