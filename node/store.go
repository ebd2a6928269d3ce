package node

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/events/esdb"
	"github.com/hookline/hookline/events/postgres"
	"github.com/hookline/hookline/seal"
)

// storeKind names the log's backend Config.Store selects: embedded,
// postgres or eventstoredb; "" when it names none. It is the one place
// that reads a store's URL scheme.
func storeKind(store string) string {
	switch {
	case store == "" || store == "embedded":
		return "embedded"
	case strings.HasPrefix(store, "postgres://") || strings.HasPrefix(store, "postgresql://"):
		return "postgres"
	case strings.HasPrefix(store, "kurrentdb") || strings.HasPrefix(store, "esdb"):
		return "eventstoredb"
	}
	return ""
}

// openArchive opens Config.Archive, when set.
func (s *Server) openArchive(ctx context.Context) error {
	if s.cfg.Archive == "" {
		return nil
	}
	a, err := archive.Open(ctx, s.cfg.Archive, s.cfg.Logger)
	if err != nil {
		return err
	}
	s.archive = a
	return nil
}

// openLog opens the log Config.Store selects, or takes Config.Log, which
// the caller owns.
func (s *Server) openLog(ctx context.Context) error {
	cfg := s.cfg
	if cfg.Log != nil {
		s.log = cfg.Log
		return nil
	}
	var archiver events.Archiver
	if s.archive != nil {
		archiver = s.archive
	}
	var err error
	switch storeKind(cfg.Store) {
	case "embedded":
		s.log, err = embedded.Open(embedded.Config{Dir: filepath.Join(cfg.DataDir, "log"), Now: cfg.Now, Logger: cfg.Logger,
			Retention: cfg.Retention, RetainEvery: cfg.RetainEvery, Archive: archiver})
	case "postgres":
		s.log, err = postgres.Open(ctx, postgres.Config{DSN: cfg.Store, Schema: cfg.StoreSchema, Now: cfg.Now, Logger: cfg.Logger,
			Retention: cfg.Retention, Archive: archiver})
	case "eventstoredb":
		s.log, err = esdb.Open(ctx, esdb.Config{ConnectionString: cfg.Store, Logger: cfg.Logger})
	}
	if err != nil {
		return err
	}
	s.ownsLog = true
	return nil
}

// sharedLog reports whether the node's log is shared with other nodes: a
// PostgreSQL or KurrentDB store, or a cluster to join.
func sharedLog(cfg Config) bool {
	return len(cfg.Cluster.Seeds) > 0 || storeKind(cfg.Store) != "embedded"
}

// loadKeyring loads the master keys: HOOKLINE_MASTER_KEY, its file, or,
// for a node on a log of its own, the development key file in DataDir
// (which seal.LoadKeyring creates, loudly).
func loadKeyring(cfg Config) (*seal.Keyring, error) {
	switch {
	case cfg.MasterKeyFile != "":
		kr, err := seal.LoadKeyFile(cfg.MasterKeyFile)
		if err != nil {
			return nil, fmt.Errorf("master key: %w", err)
		}
		return kr, nil
	case strings.TrimSpace(cfg.MasterKey) == "" && sharedLog(cfg):
		return nil, ErrNoMasterKey
	}
	kr, _, err := seal.LoadKeyring(cfg.MasterKey, cfg.DataDir, cfg.Logger)
	return kr, err
}

// redact hides the password of a connection string in messages.
func redact(dsn string) string {
	if u, err := url.Parse(dsn); err == nil && u.User != nil {
		return u.Redacted()
	}
	return dsn
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
