package node

import "testing"

func TestStoreKindAndESDBLink(t *testing.T) {
	for _, tc := range []struct {
		store, kind, link string
	}{
		{store: "", kind: "embedded"},
		{store: "embedded", kind: "embedded"},
		{store: "postgres://u:p@db:5432/h", kind: "postgres"},
		{store: "kurrentdb://localhost:2113?tls=false", kind: "eventstoredb", link: "http://localhost:2113/web/index.html#/streams/event-acme.ord:1"},
		{store: "esdb://admin:changeit@n1:2113,n2:2113?tls=true", kind: "eventstoredb", link: "https://n1:2113/web/index.html#/streams/event-acme.ord:1"},
		{store: "esdb+discover://admin:secret@cluster.example:2113", kind: "eventstoredb", link: "https://cluster.example:2113/web/index.html#/streams/event-acme.ord:1"},
	} {
		t.Run(tc.store, func(t *testing.T) {
			if got := storeKind(tc.store); got != tc.kind {
				t.Errorf("storeKind = %s, want %s", got, tc.kind)
			}
			if tc.kind != "eventstoredb" {
				return
			}
			link := esdbLink(tc.store)
			if link == nil {
				t.Fatal("no link")
			}
			if got := link("event-acme.ord:1"); got != tc.link {
				t.Errorf("link = %s, want %s", got, tc.link)
			}
		})
	}
}
