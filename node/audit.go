package node

import (
	"net/url"
	"strings"
)

// storeKind names the log's backend for the operator's views: embedded,
// postgres or eventstoredb.
func storeKind(store string) string {
	switch {
	case strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://"):
		return "postgres"
	case strings.HasPrefix(store, "kurrentdb") || strings.HasPrefix(store, "esdb"):
		return "eventstoredb"
	}
	return "embedded"
}

// esdbLink returns the function that links a stream to EventStoreDB's web
// UI, for a KurrentDB/EventStoreDB connection string (kurrentdb://,
// esdb://, esdb+discover://; the first host; https unless tls=false), or
// nil when the string names no host. Credentials never reach the link.
func esdbLink(store string) func(stream string) string {
	_, rest, ok := strings.Cut(store, "://")
	if !ok {
		return nil
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = rest[at+1:]
	}
	hosts, query, _ := strings.Cut(rest, "?")
	hosts, _, _ = strings.Cut(hosts, "/")
	host, _, _ := strings.Cut(hosts, ",")
	if host == "" {
		return nil
	}
	scheme := "https"
	if q, err := url.ParseQuery(query); err == nil && strings.EqualFold(q.Get("tls"), "false") {
		scheme = "http"
	}
	base := scheme + "://" + host + "/web/index.html#/streams/"
	return func(stream string) string { return base + url.PathEscape(stream) }
}
