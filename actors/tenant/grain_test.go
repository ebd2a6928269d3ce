package tenant_test

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/hookline/hookline/actors/tenant"
	"github.com/hookline/hookline/events"
	"github.com/hookline/hookline/events/embedded"
	"github.com/hookline/hookline/proto/gen/hookline/internalv1"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// clock is an injected clock that tests move by hand.
type clock struct {
	mu  sync.Mutex // guards now
	now time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func openLog(t *testing.T) events.Log {
	t.Helper()
	l, err := embedded.Open(embedded.Config{Dir: "/log", FS: vfs.NewMem(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func newSystem(t *testing.T) *actor.ActorSystem {
	t.Helper()
	sys := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(sys.Shutdown)
	return sys
}

func ask(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, cmd *internalv1.TenantCommand) *internalv1.TenantReply {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, cmd, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("request %v: %v", cmd, err)
	}
	return res.(*internalv1.TenantReply)
}

// waitStopped polls until pid no longer answers (its requests go to dead
// letters).
func waitStopped(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err := sys.Root.RequestFuture(pid, &internalv1.TenantCommand{}, time.Second).Result()
		if errors.Is(err, actor.ErrDeadLetter) {
			return
		}
	}
	t.Fatalf("%v did not stop", pid)
}

func TestGrain(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	clk := &clock{now: t0}
	cfg := tenant.Config{Log: log, Now: clk.Now, Logger: quiet}
	pid := sys.Root.Spawn(tenant.Props(cfg, "acme"))

	rep := ask(t, sys, pid, create("Acme", &hooklinev1.Quota{AttemptsPerSecond: 20, MaxInFlight: 4}))
	if rep.GetError() != nil || rep.GetTenant().GetName() != "Acme" {
		t.Fatalf("create: %v", rep)
	}
	rep = ask(t, sys, pid, create("Acme", nil))
	if rep.GetError().GetCode() != internalv1.GrainError_CODE_ALREADY_EXISTS {
		t.Fatalf("second create: %v", rep)
	}

	rep = ask(t, sys, pid, &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_IssueKey{IssueKey: &controlv1.IssueApiKeyRequest{Name: "billing"}}})
	key := rep.GetKey()
	if rep.GetError() != nil || !strings.HasPrefix(key.GetApiKey(), "hk_") {
		t.Fatalf("issue: %v", rep)
	}
	rep = ask(t, sys, pid, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{TenantId: "acme"}}})
	if rep.GetKey() != nil || len(rep.GetTenant().GetApiKeys()) != 1 {
		t.Fatalf("get after issue shows %v", rep)
	}

	clk.Add(time.Minute)
	rep = ask(t, sys, pid, &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_RevokeKey{RevokeKey: &controlv1.RevokeApiKeyRequest{KeyId: key.GetKeyId()}}})
	if rep.GetError() != nil || !rep.GetTenant().GetApiKeys()[0].GetRevoked() {
		t.Fatalf("revoke: %v", rep)
	}

	rep = ask(t, sys, pid, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Lease{Lease: &internalv1.QuotaLeaseRequest{EndpointId: "ep_1", WantAttempts: 100, WantInFlight: 100}}})
	if l := rep.GetLease(); l.GetAttempts() != 20 || l.GetInFlight() != 4 || !l.GetExpiresAt().AsTime().Equal(clk.Now().Add(time.Second)) {
		t.Fatalf("lease: %v", rep)
	}

	// The log: four events, the key only as its hash, who and when recorded.
	recs, err := log.ReadStream(t.Context(), events.TenantStream("acme"), events.Forwards, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i := range recs {
		types = append(types, recs[i].Type)
		if bytes.Contains(recs[i].Data, []byte(key.GetApiKey())) || bytes.Contains(recs[i].Metadata, []byte(key.GetApiKey())) {
			t.Fatalf("record %d holds the api key", i)
		}
		msg, err := events.Decode(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if k, ok := msg.(*hooklinev1.ApiKeyIssued); ok && !bytes.Equal(k.GetKeySha256(), tenant.HashKey(key.GetApiKey())) {
			t.Fatal("key_sha256 is not the key's hash")
		}
		if r, ok := msg.(*hooklinev1.ApiKeyRevoked); ok && (r.GetIssuedBy().GetId() != "ops" || !r.GetAt().AsTime().Equal(t0.Add(time.Minute))) {
			t.Fatalf("revoked by %v at %v", r.GetIssuedBy(), r.GetAt().AsTime())
		}
	}
	if got := strings.Join(types, ","); got != "TenantCreated,ApiKeyIssued,ApiKeyRevoked" {
		t.Fatalf("types %s", got)
	}

	// A new activation rebuilds the same tenant from the log.
	before := ask(t, sys, pid, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{}}}).GetTenant()
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	pid = sys.Root.Spawn(tenant.Props(cfg, "acme"))
	after := ask(t, sys, pid, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{}}}).GetTenant()
	if before.String() != after.String() {
		t.Fatalf("rebuilt %v, want %v", after, before)
	}
}

func TestGrainFencing(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	cfg := tenant.Config{Log: log, Now: (&clock{now: t0}).Now, Logger: quiet}
	get := &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{}}}
	issue := &internalv1.TenantCommand{IssuedBy: admin, Command: &internalv1.TenantCommand_IssueKey{IssueKey: &controlv1.IssueApiKeyRequest{Name: "k"}}}

	a := sys.Root.Spawn(tenant.Props(cfg, "acme"))
	if rep := ask(t, sys, a, create("Acme", nil)); rep.GetError() != nil {
		t.Fatal(rep)
	}
	b := sys.Root.Spawn(tenant.Props(cfg, "acme"))
	if rep := ask(t, sys, b, get); rep.GetTenant().GetName() != "Acme" {
		t.Fatalf("b loaded %v", rep)
	}
	if rep := ask(t, sys, a, issue); rep.GetError() != nil {
		t.Fatal(rep)
	}
	rep := ask(t, sys, b, issue)
	if rep.GetError().GetCode() != internalv1.GrainError_CODE_ABORTED || rep.GetKey() != nil {
		t.Fatalf("stale activation answered %v, want ABORTED", rep)
	}
	waitStopped(t, sys, b)
	recs, err := log.ReadStream(t.Context(), events.TenantStream("acme"), events.Forwards, 0, 100)
	if err != nil || len(recs) != 2 {
		t.Fatalf("stream has %d events (%v), want 2", len(recs), err)
	}
}

// TestGrainRetriedCommands: a command repeated with its request id (its
// first answer was lost) changes nothing again. A retried create answers
// the tenant, not ALREADY_EXISTS. A retried key issue cannot show the first
// key again (the log holds its hash only): that key, which nobody saw, is
// revoked and the retry gets a new one, so no live key is left unseen. A
// new activation recognises the request ids from the stream.
func TestGrainRetriedCommands(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	cfg := tenant.Config{Log: log, Now: (&clock{now: t0}).Now, Logger: quiet}
	pid := sys.Root.Spawn(tenant.Props(cfg, "acme"))

	c := create("Acme", nil)
	c.RequestId = "req_create"
	for i := range 2 {
		if rep := ask(t, sys, pid, c); rep.GetError() != nil || rep.GetTenant().GetName() != "Acme" {
			t.Fatalf("create %d: %v", i+1, rep)
		}
	}
	issue := &internalv1.TenantCommand{IssuedBy: admin, RequestId: "req_issue", Command: &internalv1.TenantCommand_IssueKey{IssueKey: &controlv1.IssueApiKeyRequest{Name: "billing"}}}
	first := ask(t, sys, pid, issue).GetKey()
	second := ask(t, sys, pid, issue).GetKey()
	if first.GetApiKey() == "" || second.GetApiKey() == "" || first.GetKeyId() == second.GetKeyId() {
		t.Fatalf("issued %v then %v, want two different keys", first, second)
	}
	// Another activation (the first one's node died after the append).
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	pid = sys.Root.Spawn(tenant.Props(cfg, "acme"))
	third := ask(t, sys, pid, issue).GetKey()
	if third.GetApiKey() == "" || third.GetKeyId() == second.GetKeyId() {
		t.Fatalf("a new activation answered the retry with %v", third)
	}
	recs, err := log.ReadStream(t.Context(), events.TenantStream("acme"), events.Forwards, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for i := range recs {
		types = append(types, recs[i].Type)
	}
	if got, want := strings.Join(types, ","), "TenantCreated,ApiKeyIssued,ApiKeyRevoked,ApiKeyIssued,ApiKeyRevoked,ApiKeyIssued"; got != want {
		t.Fatalf("events %s, want %s", got, want)
	}
	keys := ask(t, sys, pid, &internalv1.TenantCommand{Command: &internalv1.TenantCommand_Get{Get: &controlv1.GetTenantRequest{}}}).GetTenant().GetApiKeys()
	live := 0
	for _, k := range keys {
		if !k.GetRevoked() {
			live++
			if k.GetKeyId() != third.GetKeyId() {
				t.Fatalf("live key %s is not the one the last answer showed", k.GetKeyId())
			}
		}
	}
	if live != 1 {
		t.Fatalf("%d live keys, want the one shown", live)
	}
}
