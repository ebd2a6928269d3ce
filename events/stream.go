package events

import "strings"

// Stream categories, the part of a stream name before the first '-'.
const (
	TenantCategory   = "tenant"
	EndpointCategory = "endpoint"
	EventCategory    = "event"
	DeliveryCategory = "delivery"
)

// TenantStream names the stream of a tenant.
func TenantStream(tenantID string) string { return TenantCategory + "-" + tenantID }

// EndpointStream names the stream of an endpoint.
func EndpointStream(endpointID string) string { return EndpointCategory + "-" + endpointID }

// EventStream names the stream of one published event of a tenant.
func EventStream(tenantID, eventID string) string {
	return EventCategory + "-" + tenantID + "." + eventID
}

// DeliveryStream names the stream of one delivery.
func DeliveryStream(deliveryID string) string { return DeliveryCategory + "-" + deliveryID }

// Category returns the category of a stream name ("" when it has none).
func Category(stream string) string {
	c, _, ok := strings.Cut(stream, "-")
	if !ok {
		return ""
	}
	return c
}

// Expires reports whether retention may drop a stream once its last write is
// older than the cut-off: event and delivery streams expire; tenant and
// endpoint streams are kept for as long as the tenant exists.
func Expires(stream string) bool {
	switch Category(stream) {
	case EventCategory, DeliveryCategory:
		return true
	}
	return false
}
