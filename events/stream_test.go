package events_test

import (
	"strings"
	"testing"

	"github.com/hookline/hookline/events"
)

func TestStreamNames(t *testing.T) {
	cases := []struct {
		name     string
		stream   string
		want     string
		category string
		expires  bool
	}{
		{"Tenant", events.TenantStream("t_1"), "tenant-t_1", events.TenantCategory, false},
		{"Endpoint", events.EndpointStream("ep_9"), "endpoint-ep_9", events.EndpointCategory, false},
		{"Event", events.EventStream("t_1", "evt-42"), "event-t_1.evt-42", events.EventCategory, true},
		{"Delivery", events.DeliveryStream("dlv_x"), "delivery-dlv_x", events.DeliveryCategory, true},
		{"Portal", "portal-ptk_1", "portal-ptk_1", events.PortalCategory, true},
		{"NoCategory", "plain", "plain", "", false},
		{"Unknown", "other-1", "other-1", "other", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.stream != c.want {
				t.Errorf("stream = %q, want %q", c.stream, c.want)
			}
			if got := events.Category(c.stream); got != c.category {
				t.Errorf("Category(%q) = %q, want %q", c.stream, got, c.category)
			}
			if got := events.Expires(c.stream); got != c.expires {
				t.Errorf("Expires(%q) = %v, want %v", c.stream, got, c.expires)
			}
		})
	}
}

func TestDeliveryID(t *testing.T) {
	a := events.DeliveryID("t_1", "evt_1", "ep_1")
	if b := events.DeliveryID("t_1", "evt_1", "ep_1"); a != b {
		t.Errorf("DeliveryID is not deterministic: %q then %q", a, b)
	}
	if !strings.HasPrefix(a, "dlv_") {
		t.Errorf("DeliveryID = %q, want the dlv_ prefix", a)
	}
	for _, o := range [][3]string{{"t_2", "evt_1", "ep_1"}, {"t_1", "evt_2", "ep_1"}, {"t_1", "evt_1", "ep_2"}, {"t_1e", "vt_1", "ep_1"}} {
		if events.DeliveryID(o[0], o[1], o[2]) == a {
			t.Errorf("DeliveryID%v collides with DeliveryID(t_1, evt_1, ep_1)", o)
		}
	}
}
