package e2e_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/archive"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/events/eventstest"
	"github.com/hookline/hookline/events/postgres"
	"github.com/hookline/hookline/node"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
	"github.com/hookline/hookline/seal"
	"github.com/hookline/hookline/seal/kekstore"
)

// Markers written in payloads and response bodies: after erasure, no copy
// of erasedMarker may be readable anywhere, and keptMarker (another
// tenant's) must still be.
const (
	erasedMarker = "ERASE-ME-5a1c9e"
	keptMarker   = "KEEP-ME-0b7d42"
)

// TestEraseEmbedded erases a tenant on a node with the embedded store, a
// 1-minute retention and a file:// archive: the payloads are in the
// archive (and only there) when the tenant is erased.
func TestEraseEmbedded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "node")
	clk := &offsetClock{}
	arc := &eraseArchive{clk: clk, dir: filepath.Join(t.TempDir(), "archive")}
	cfg := node.Config{DataDir: dir, Now: clk.Now, Retention: time.Minute, RetainEvery: 50 * time.Millisecond,
		Archive: "file://" + arc.dir + "?create_dir=1"}
	testErase(t, cfg, arc, func(t *testing.T) (events.Log, error) {
		return embedded.Open(embedded.Config{Dir: filepath.Join(dir, "log"), Logger: testLogger()})
	})
}

// offsetClock is the real clock moved forward by hand: retries still come
// due by themselves.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return time.Now().Add(c.off) }
func (c *offsetClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// eraseArchive is a node's archive and the clock that moves its events
// past retention.
type eraseArchive struct {
	clk *offsetClock
	dir string
}

// values reads every record of the archive through its own reader.
func (a *eraseArchive) values(t *testing.T) [][]byte {
	t.Helper()
	arc, err := archive.Open(t.Context(), "file://"+a.dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer arc.Close()
	var out [][]byte
	if err := arc.Each(t.Context(), func(r events.Record) error {
		out = append(out, []byte(r.Stream), r.Data, r.Metadata)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestErasePostgres erases a tenant on a node whose log is in PostgreSQL,
// in a schema of its own, dropped at the end, with the vault's KEKs in a
// directory of their own: a copy of the vault's table made before the
// erasure (as a backup, the WAL or a replica holds it) opens nothing
// after it.
func TestErasePostgres(t *testing.T) {
	dsn := os.Getenv("HOOKLINE_POSTGRES_URL")
	if dsn == "" {
		t.Skip("!!! HOOKLINE_POSTGRES_URL is not set: SKIPPING erasure on PostgreSQL (source /var/tmp/hookline-postgres/env, or run eval \"$(.ci/postgres.sh)\") !!!")
	}
	schema := eventstest.PostgresSchema(t, dsn, "erase_")
	dir := filepath.Join(t.TempDir(), "node")
	cfg := node.Config{DataDir: dir, Store: dsn, StoreSchema: schema, VaultKEK: "file://" + filepath.ToSlash(filepath.Join(t.TempDir(), "keks"))}
	testErase(t, cfg, nil, func(t *testing.T) (events.Log, error) {
		return postgres.Open(t.Context(), postgres.Config{DSN: dsn, Schema: schema})
	})
}

// testErase publishes payloads with markers for two tenants, erases one,
// and checks what the issue asks: its payloads answer 410 over REST and
// its response bodies read as erased, its pending delivery ends failed
// with reason erased, the other tenant is untouched, a copy of the log
// taken before the erasure (a backup) no longer opens, every record of the
// log and every value of the projections holds the marker only as
// ciphertext (read through the stores' own readers, once the node is
// stopped), and a restarted node cannot read the payloads either.
// openLog opens the node's store with its own reader once the node is
// stopped. With arc, the events are moved past the log's retention into
// the archive before the erasure, and the archive is scanned too.
func testErase(t *testing.T, cfg node.Config, arc *eraseArchive, openLog func(*testing.T) (events.Log, error)) {
	cfg.Schedule = attempt.Schedule{Base: time.Second, Cap: time.Second, MaxAttempts: 100}
	n, stop := runE2E(t, cfg)
	rc := newHookReceiver(t, cfg.Now)
	gone, kept := n.tenant(t, "gone", nil), n.tenant(t, "kept", nil)
	ok := func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "received %s", erasedMarker)
	}
	gone.endpoint(t, rc, "gone_ok", []string{"order.paid"}, nil, ok)
	gone.endpoint(t, rc, "gone_down", []string{"order.paid"}, nil, answer(http.StatusInternalServerError))
	kept.endpoint(t, rc, "kept_ok", []string{"order.paid"}, nil, answer(http.StatusOK))

	publish := func(c *tenantClient, id, marker string) (okID, downID string) {
		t.Helper()
		res, err := c.events.Publish(c.ctx(), &controlv1.PublishRequest{EventId: id, Type: "order.paid", Payload: fmt.Appendf(nil, `{"note":%q}`, marker)})
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		for _, d := range res.GetDeliveries() {
			if name := c.names[d.GetEndpointId()]; name == c.id+"_ok" {
				okID = d.GetDeliveryId()
			} else {
				downID = d.GetDeliveryId()
			}
		}
		return okID, downID
	}
	goneOK, goneDown := publish(gone, "evt_gone_1", erasedMarker)
	keptOK, _ := publish(kept, "evt_kept_1", keptMarker)
	gone.waitDelivery(t, goneOK, "delivered", hasStatus("succeeded"))
	gone.waitDelivery(t, goneDown, "attempted once", hasAttempts(1))
	kept.waitDelivery(t, keptOK, "delivered", hasStatus("succeeded"))
	if d := gone.waitDelivery(t, goneOK, "delivered", hasStatus("succeeded")); !bytes.Contains(d.GetAttempts()[0].GetResponsePrefix(), []byte(erasedMarker)) {
		t.Fatalf("before erasure the response body reads %q", d.GetAttempts()[0].GetResponsePrefix())
	}
	if code, got := n.rest(t, http.MethodGet, gone.key, "/v1/events/evt_gone_1", nil); code != http.StatusOK || got["sealed"] != true {
		t.Fatalf("GET the event before erasure: %d %v", code, got)
	}
	backup := logRecordsOf(t, n)
	vaultCopy, err := n.srv.Vault().DataKeys(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if arc != nil {
		arc.clk.Add(2 * time.Minute)
		for _, id := range []string{"evt_gone_1", "evt_kept_1"} {
			stream := events.EventStream(map[string]string{"evt_gone_1": "gone", "evt_kept_1": "kept"}[id], id)
			eventually(t, 20*time.Second, "retention moves "+stream+" to the archive", func() bool {
				_, err := n.srv.Log().ReadStream(t.Context(), stream, events.Forwards, 0, 1)
				return errors.Is(err, events.ErrStreamNotFound)
			})
		}
		if code, got := n.rest(t, http.MethodGet, gone.key, "/v1/events/evt_gone_1", nil); code != http.StatusOK || got["from_archive"] != true {
			t.Fatalf("GET the archived event before erasure: %d %v", code, got)
		}
	}

	if code, got := n.rest(t, http.MethodPost, e2eAdmin, "/v1/tenants/gone/erase", map[string]any{"confirm": "kept"}); code != http.StatusBadRequest {
		t.Fatalf("erase with the wrong confirmation: %d %v, want 400", code, got)
	}
	code, got := n.rest(t, http.MethodPost, e2eAdmin, "/v1/tenants/gone/erase", map[string]any{"confirm": "gone"})
	if code != http.StatusOK || got["data_key_id"] == "" {
		t.Fatalf("erase: %d %v", code, got)
	}
	if code, got := n.rest(t, http.MethodPost, gone.key, "/v1/tenants/kept/erase", map[string]any{"confirm": "kept"}); code != http.StatusForbidden && code != http.StatusUnauthorized {
		t.Fatalf("erase with a tenant key: %d %v, want refused", code, got)
	}
	wantGone := func(n *e2eNode) {
		t.Helper()
		if code, got := n.rest(t, http.MethodGet, gone.key, "/v1/events/evt_gone_1", nil); code != http.StatusGone {
			t.Fatalf("GET an erased payload: %d %v, want 410", code, got)
		}
		code, got := n.rest(t, http.MethodGet, kept.key, "/v1/events/evt_kept_1", nil)
		if payload, _ := got["payload"].(string); code != http.StatusOK || payload == "" {
			t.Fatalf("GET the other tenant's event: %d %v", code, got)
		}
	}
	wantGone(n)
	if d := gone.waitDelivery(t, goneOK, "read", hasStatus("succeeded")); !d.GetErased() || len(d.GetAttempts()[0].GetResponsePrefix()) != 0 {
		t.Fatalf("an erased delivery's response body: erased %v, %q", d.GetErased(), d.GetAttempts()[0].GetResponsePrefix())
	}
	d := gone.waitDelivery(t, goneDown, "ended erased", hasStatus("failed"))
	if last := d.GetAttempts()[len(d.GetAttempts())-1]; last.GetErrorClass() != hooklinev1.ErrorClass_ERROR_CLASS_ERASED {
		t.Fatalf("the pending delivery ended with %v, want ERASED", last)
	}
	if d := kept.waitDelivery(t, keptOK, "read", hasStatus("succeeded")); d.GetErased() {
		t.Fatalf("the other tenant's delivery reads as erased")
	}
	code, trace := n.rest(t, http.MethodGet, e2eAdmin, "/v1/audit/deliveries/"+goneOK+"?tenant_id=gone", nil)
	shown := map[string]any{}
	for _, e := range trace["events"].([]any) {
		ev := e.(map[string]any)
		data, _ := ev["data"].(map[string]any)
		switch ev["type"] {
		case "EventPublished":
			shown["payload"] = data["payload"]
		case "AttemptSucceeded":
			shown["response"] = data["attempt"].(map[string]any)["response_prefix"]
		}
	}
	if code != http.StatusOK || shown["payload"] != "erased" || shown["response"] != "erased" {
		t.Fatalf("the audit trace of an erased delivery shows %v (%d)", shown, code)
	}
	if rep := reconcileReport(t, n); !rep.GetClean() {
		t.Fatalf("reconcile after the erasure: %v", rep.GetDiscrepancies())
	}
	// After the erasure, publishing goes on under a new key.
	publish(gone, "evt_gone_2", "after")
	if code, got := n.rest(t, http.MethodGet, gone.key, "/v1/events/evt_gone_2", nil); code != http.StatusOK {
		t.Fatalf("GET an event published after the erasure: %d %v", code, got)
	}

	// A backup of the log taken before the erasure opens no more.
	var keks *kekstore.Store
	if cfg.VaultKEK != "" {
		if keks, err = kekstore.Open(t.Context(), cfg.VaultKEK); err != nil {
			t.Fatal(err)
		}
		defer keks.Close()
	}
	withKEKs := func(p *seal.Payloads) *seal.Payloads {
		if keks != nil {
			p.UseKEKs(keks)
		}
		return p
	}
	opener := withKEKs(seal.NewPayloads(n.srv.Vault(), mustKeyring(t), nil))
	opened := map[string]error{}
	for i := range backup {
		msg, err := events.Decode(&backup[i])
		if p, ok := msg.(*hooklinev1.EventPublished); err == nil && ok && p.GetEventId() != "evt_gone_2" {
			_, opened[p.GetTenantId()] = opener.OpenEvent(t.Context(), p)
		}
	}
	if !errors.Is(opened["gone"], seal.ErrErased) || opened["kept"] != nil {
		t.Fatalf("opening the backup's events: %v", opened)
	}
	if keks != nil {
		// A copy of the vault made before the erasure, with the master key
		// and the KEK store: the KEK it was wrapped under is destroyed.
		fromCopy := withKEKs(seal.NewPayloads(restoredVault(t, vaultCopy), mustKeyring(t), nil))
		for i := range backup {
			msg, err := events.Decode(&backup[i])
			if p, ok := msg.(*hooklinev1.EventPublished); err == nil && ok && p.GetTenantId() == "gone" {
				if ev, err := fromCopy.OpenEvent(t.Context(), p); err == nil {
					t.Fatalf("a copy of the vault made before the erasure opens the erased payload: %q", ev.GetPayload())
				}
			}
		}
	}

	stop()
	scan := func(what string, values [][]byte) {
		t.Helper()
		sawID := false
		for _, v := range values {
			if bytes.Contains(v, []byte(erasedMarker)) || bytes.Contains(v, []byte(keptMarker)) {
				t.Fatalf("%s holds a marker in clear: %q", what, v)
			}
			sawID = sawID || bytes.Contains(v, []byte("evt_gone_1"))
		}
		if !sawID {
			t.Fatalf("%s: the scan found not even the event id (kept in clear): it read nothing", what)
		}
	}
	l, err := openLog(t)
	if err != nil {
		t.Fatal(err)
	}
	var logValues [][]byte
	for _, r := range readAll(t, l) {
		logValues = append(logValues, r.Data, r.Metadata)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	scan("the log", logValues)
	scan("the projections", pebbleValues(t, filepath.Join(cfg.DataDir, "projections")))
	if arc != nil {
		scan("the archive", arc.values(t))
	}

	n2, _ := runE2E(t, cfg)
	wantGone(n2)
}

// restoredVault is a vault in memory holding copied, as a restore of a
// copy of another vault would.
func restoredVault(t *testing.T, copied []events.DataKey) events.Vault {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "/restored", FS: vfs.NewMem(), Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	for _, k := range copied {
		if cur, err := l.KEK(t.Context()); err != nil || cur != k.KEK {
			if err := l.SetKEK(t.Context(), cur, k.KEK); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.PutDataKey(t.Context(), k); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// logRecordsOf reads the running node's whole log.
func logRecordsOf(t *testing.T, n *e2eNode) []events.Record {
	t.Helper()
	return readAll(t, n.srv.Log())
}

// readAll reads a log from its start to its head.
func readAll(t *testing.T, l events.Log) []events.Record {
	t.Helper()
	var out []events.Record
	for pos := events.Start; ; {
		recs, err := l.ReadAll(t.Context(), pos, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
		pos = recs[len(recs)-1].Position
	}
}

// pebbleValues reads every key and value of every Pebble store under dir,
// through Pebble (its blocks may be compressed on disk).
func pebbleValues(t *testing.T, dir string) [][]byte {
	t.Helper()
	var dbs []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "MANIFEST-") && !slices.Contains(dbs, filepath.Dir(path)) {
			dbs = append(dbs, filepath.Dir(path))
		}
		return err
	})
	if err != nil || len(dbs) == 0 {
		t.Fatalf("no Pebble store under %s: %v", dir, err)
	}
	var out [][]byte
	for _, d := range dbs {
		db, err := pebble.Open(d, &pebble.Options{ReadOnly: true})
		if err != nil {
			t.Fatalf("open %s: %v", d, err)
		}
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		for it.First(); it.Valid(); it.Next() {
			out = append(out, bytes.Clone(it.Key()), bytes.Clone(it.Value()))
		}
		if err := errors.Join(it.Close(), db.Close()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func mustKeyring(t *testing.T) *seal.Keyring {
	t.Helper()
	kr, err := seal.ParseKeys(e2eMasterKey)
	if err != nil {
		t.Fatal(err)
	}
	return kr
}
