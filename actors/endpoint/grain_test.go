package endpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/cockroachdb/pebble/v2/vfs"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/hookline/hookline/actors/endpoint"
	"github.com/hookline/hookline/attempt"
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

// resolver answers DNS from a map: the injected resolver at the process
// boundary.
type resolver map[string]string

func (r resolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	ip, ok := r[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return []net.IPAddr{{IP: net.ParseIP(ip)}}, nil
}

var (
	quiet  = slog.New(slog.NewTextHandler(io.Discard, nil))
	policy = &attempt.Policy{Resolver: resolver{"hooks.example.com": "93.184.215.14", "evil.example.com": "10.1.2.3"}}
)

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

func ask(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, c *internalv1.EndpointCommand) *internalv1.EndpointReply {
	t.Helper()
	res, err := sys.Root.RequestFuture(pid, c, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("request %v: %v", c, err)
	}
	return res.(*internalv1.EndpointReply)
}

func mustOK(t *testing.T, rep *internalv1.EndpointReply) *internalv1.EndpointReply {
	t.Helper()
	if rep.GetError() != nil {
		t.Fatalf("error reply: %v", rep.GetError())
	}
	return rep
}

func readStream(t *testing.T, log events.Log, id string) []events.Record {
	t.Helper()
	recs, err := log.ReadStream(t.Context(), events.EndpointStream(id), events.Forwards, 0, 1000)
	if err != nil && !errors.Is(err, events.ErrStreamNotFound) {
		t.Fatal(err)
	}
	return recs
}

func types(recs []events.Record) string {
	var out []string
	for _, r := range recs {
		out = append(out, r.Type)
	}
	return strings.Join(out, ",")
}

func TestGrainLifecycle(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	clk := &clock{now: t0}
	kr := keyring(t)
	cfg := endpoint.Config{Log: log, Keyring: kr, Policy: policy, Now: clk.Now, Logger: quiet}
	pid := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))

	// Create: config_version 1, one secret, shown once.
	rep := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{
		Url: "https://HOOKS.example.com/in", EventTypes: []string{"invoice.paid"},
	}})))
	secret1 := rep.GetSecret()
	ep := rep.GetEndpoint()
	if !strings.HasPrefix(secret1, "whsec_") || ep.GetConfigVersion() != 1 || ep.GetStatus() != controlv1.Endpoint_STATUS_ACTIVE ||
		len(ep.GetSecrets()) != 1 || ep.GetSettings().GetUrl() != hookURL {
		t.Fatalf("create: %v", rep)
	}

	// Get: no secret; another tenant sees nothing.
	rep = mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{EndpointId: "ep_1"})))
	if rep.GetSecret() != "" || !proto.Equal(rep.GetEndpoint(), ep) {
		t.Fatalf("get: %v", rep)
	}
	if rep := ask(t, sys, pid, cmd("globex", &controlv1.GetEndpointRequest{})); rep.GetError().GetCode() != internalv1.GrainError_CODE_NOT_FOUND || rep.GetEndpoint() != nil {
		t.Fatalf("other tenant: %v", rep)
	}

	// Update: a blocked URL is refused with the policy's message, which
	// does not name the address the host resolved to, and nothing is
	// written; a description raises config_version to 2.
	rep = ask(t, sys, pid, cmd("acme", &controlv1.UpdateEndpointRequest{
		Settings: &controlv1.EndpointSettings{Url: "https://evil.example.com/"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"settings.url"}},
	}))
	if e := rep.GetError(); e.GetCode() != internalv1.GrainError_CODE_INVALID_ARGUMENT || e.GetField() != "settings.url" || !strings.Contains(e.GetMessage(), "not public") || strings.Contains(e.GetMessage(), "10.1.2.3") {
		t.Fatalf("blocked update: %v", rep)
	}
	rep = mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.UpdateEndpointRequest{
		Settings: &controlv1.EndpointSettings{Description: "billing"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}},
	})))
	if ep := rep.GetEndpoint(); ep.GetConfigVersion() != 2 || ep.GetSettings().GetDescription() != "billing" {
		t.Fatalf("update: %v", rep)
	}

	// Rotate: two live secrets, both listed, newest first.
	rep = mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.RotateSecretRequest{OverlapSeconds: 3600})))
	secret2 := rep.GetSecret()
	if s := rep.GetEndpoint().GetSecrets(); secret2 == "" || secret2 == secret1 || len(s) != 2 || s[0].GetVersion() != 2 || s[1].GetVersion() != 1 ||
		!s[1].GetExpiresAt().AsTime().Equal(t0.Add(time.Hour)) {
		t.Fatalf("rotate: %v", rep)
	}

	// Past the overlap, any command (here a Get) retires the old secret
	// first.
	clk.Add(time.Hour + time.Second)
	retiredFirst(t, sys, pid, log)

	// Pause and resume.
	if rep := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.PauseEndpointRequest{}))); rep.GetEndpoint().GetStatus() != controlv1.Endpoint_STATUS_PAUSED {
		t.Fatalf("pause: %v", rep)
	}
	if rep := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.ResumeEndpointRequest{}))); rep.GetEndpoint().GetStatus() != controlv1.Endpoint_STATUS_ACTIVE {
		t.Fatalf("resume: %v", rep)
	}

	// A new activation rebuilds the same endpoint from the log.
	before := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{}))).GetEndpoint()
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	pid = sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	after := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{}))).GetEndpoint()
	if !proto.Equal(before, after) {
		t.Fatalf("rebuilt\n%v\nwant\n%v", after, before)
	}

	// Delete; afterwards the endpoint is gone.
	if rep := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.DeleteEndpointRequest{}))); rep.GetEndpoint().GetStatus() != controlv1.Endpoint_STATUS_DELETED {
		t.Fatalf("delete: %v", rep)
	}
	if rep := ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{})); rep.GetError().GetCode() != internalv1.GrainError_CODE_NOT_FOUND {
		t.Fatalf("get after delete: %v", rep)
	}

	recs := readStream(t, log, "ep_1")
	if got, want := types(recs), "EndpointCreated,EndpointUpdated,SecretRotated,SecretRetired,EndpointPaused,EndpointResumed,EndpointDeleted"; got != want {
		t.Fatalf("events\n%s\nwant\n%s", got, want)
	}
	issuedByCaller(t, recs)
	noSecretInLog(t, log, secret1, secret2)
}

// retiredFirst checks that a command past the rotation overlap (a Get)
// retires the previous secret (version 1) before it is answered.
func retiredFirst(t *testing.T, sys *actor.ActorSystem, pid *actor.PID, log events.Log) {
	t.Helper()
	mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{})))
	recs := readStream(t, log, "ep_1")
	last, err := events.Decode(&recs[len(recs)-1])
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := last.(*hooklinev1.SecretRetired); !ok || r.GetVersion() != 1 || r.GetReason() != hooklinev1.SecretRetired_REASON_OVERLAP_ENDED {
		t.Fatalf("last event %T %v, want SecretRetired of version 1", last, last)
	}
	rep := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{})))
	if s := rep.GetEndpoint().GetSecrets(); len(s) != 1 || s[0].GetVersion() != 2 {
		t.Fatalf("secrets after the overlap: %v", s)
	}
}

// issuedByCaller checks who and when: every event but the system's
// retirement was issued by the caller.
func issuedByCaller(t *testing.T, recs []events.Record) {
	t.Helper()
	for i := range recs {
		msg, err := events.Decode(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		by := msg.ProtoReflect().Interface().(interface{ GetIssuedBy() *hooklinev1.Actor }).GetIssuedBy()
		if recs[i].Type != "SecretRetired" && !proto.Equal(by, user) {
			t.Fatalf("%s issued by %v", recs[i].Type, by)
		}
	}
}

// noSecretInLog scans every record of the log for the secrets, as strings
// and as decoded key bytes.
func noSecretInLog(t *testing.T, log events.Log, secrets ...string) {
	t.Helper()
	all, err := log.ReadAll(t.Context(), events.Start, 10_000)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) == 0 {
		t.Fatal("empty log")
	}
	for _, s := range secrets {
		key, err := attempt.ParseSecret(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			for _, b := range [][]byte{r.Data, r.Metadata} {
				if bytes.Contains(b, []byte(s)) || bytes.Contains(b, key) || bytes.Contains(b, []byte(strings.TrimPrefix(s, "whsec_"))) {
					t.Fatalf("%s@%d (%s) holds a secret in clear", r.Stream, r.Revision, r.Type)
				}
			}
		}
	}
}

func TestGrainRefusesBlockedURLWithoutWriting(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	cfg := endpoint.Config{Log: log, Keyring: keyring(t), Policy: policy, Now: (&clock{now: t0}).Now, Logger: quiet}
	pid := sys.Root.Spawn(endpoint.Props(cfg, "ep_bad"))
	for _, u := range []string{"https://evil.example.com/", "http://hooks.example.com/", "https://nowhere.example.com/"} {
		rep := ask(t, sys, pid, cmd("acme", &controlv1.CreateEndpointRequest{Settings: &controlv1.EndpointSettings{Url: u, EventTypes: []string{"*"}}}))
		if e := rep.GetError(); e.GetCode() != internalv1.GrainError_CODE_INVALID_ARGUMENT || e.GetField() != "settings.url" || rep.GetSecret() != "" {
			t.Fatalf("%s: %v", u, rep)
		}
	}
	if recs := readStream(t, log, "ep_bad"); len(recs) != 0 {
		t.Fatalf("refused creates wrote %s", types(recs))
	}
}

// TestGrainFencing: a stale activation's append fails with a wrong
// revision; it answers ABORTED to that command and to every command
// already waiting for it, in its queue or still in its mailbox, and stops.
// The second command is sent while the first one's failure is being
// handled (the grain's logger holds it there): it sits in the mailbox when
// the grain decides to stop, and must be answered, not dropped.
func TestGrainFencing(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	lost := &holdLog{match: "lost ownership", reached: make(chan struct{}), release: make(chan struct{})}
	cfg := endpoint.Config{Log: log, Keyring: keyring(t), Policy: policy, Now: (&clock{now: t0}).Now, Logger: quiet}

	a := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	mustOK(t, ask(t, sys, a, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()})))
	cfg.Logger = slog.New(lost)
	b := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	mustOK(t, ask(t, sys, b, cmd("acme", &controlv1.GetEndpointRequest{}))) // b has loaded revision 0
	mustOK(t, ask(t, sys, a, cmd("acme", &controlv1.PauseEndpointRequest{})))

	f1 := sys.Root.RequestFuture(b, cmd("acme", &controlv1.RotateSecretRequest{}), 10*time.Second)
	<-lost.reached // b's append failed; b is handling it
	f2 := sys.Root.RequestFuture(b, cmd("acme", &controlv1.DeleteEndpointRequest{}), 10*time.Second)
	close(lost.release)
	for i, f := range []*actor.Future{f1, f2} {
		res, err := f.Result()
		if err != nil {
			t.Fatalf("stale command %d: %v", i+1, err)
		}
		if rep := res.(*internalv1.EndpointReply); rep.GetError().GetCode() != internalv1.GrainError_CODE_ABORTED || rep.GetSecret() != "" {
			t.Fatalf("stale command %d answered %v, want ABORTED", i+1, rep)
		}
	}
	waitStopped(t, sys, b)
	if got := types(readStream(t, log, "ep_1")); got != "EndpointCreated,EndpointPaused" {
		t.Fatalf("events %s", got)
	}
	// The owner goes on.
	if rep := mustOK(t, ask(t, sys, a, cmd("acme", &controlv1.ResumeEndpointRequest{}))); rep.GetEndpoint().GetStatus() != controlv1.Endpoint_STATUS_ACTIVE {
		t.Fatalf("owner: %v", rep)
	}
}

// holdLog is a log handler that, on the first record whose message
// contains match, signals reached and waits for release: it holds the
// goroutine that logs (a grain's) at that point of its work.
type holdLog struct {
	match            string
	reached, release chan struct{}
	once             sync.Once
}

func (h *holdLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *holdLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *holdLog) WithGroup(string) slog.Handler            { return h }
func (h *holdLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.once.Do(func() {
			close(h.reached)
			<-h.release
		})
	}
	return nil
}

// waitStopped polls until pid no longer answers (requests go to dead
// letters).
func waitStopped(t *testing.T, sys *actor.ActorSystem, pid *actor.PID) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		_, err := sys.Root.RequestFuture(pid, &internalv1.EndpointCommand{}, time.Second).Result()
		if errors.Is(err, actor.ErrDeadLetter) {
			return
		}
	}
	t.Fatalf("%v did not stop", pid)
}

// TestGrainRetiresOnTimer leaves the grain alone after a rotation with a
// one-second overlap on the real clock: its timer retires the old secret.
func TestGrainRetiresOnTimer(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	cfg := endpoint.Config{Log: log, Keyring: keyring(t), Policy: policy, Logger: quiet}
	pid := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()})))
	mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.RotateSecretRequest{OverlapSeconds: 1})))

	deadline := time.Now().Add(10 * time.Second)
	for types(readStream(t, log, "ep_1")) != "EndpointCreated,SecretRotated,SecretRetired" {
		if time.Now().After(deadline) {
			t.Fatalf("no SecretRetired; events %s", types(readStream(t, log, "ep_1")))
		}
		select {
		case <-time.After(20 * time.Millisecond): // poll interval
		case <-t.Context().Done():
			return
		}
	}
}

func TestGrainRetiresOnActivation(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	clk := &clock{now: t0}
	cfg := endpoint.Config{Log: log, Keyring: keyring(t), Policy: policy, Now: clk.Now, Logger: quiet}
	pid := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()})))
	mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.RotateSecretRequest{})))
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	clk.Add(25 * time.Hour) // the default overlap (24 h) ended while no grain was active
	pid = sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	rep := mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.GetEndpointRequest{})))
	if s := rep.GetEndpoint().GetSecrets(); len(s) != 1 || s[0].GetVersion() != 2 {
		t.Fatalf("secrets %v", s)
	}
	if got := types(readStream(t, log, "ep_1")); got != "EndpointCreated,SecretRotated,SecretRetired" {
		t.Fatalf("events %s", got)
	}
}

// TestGrainWithoutLoop: a grain without the delivery loop (no Due) refuses
// replays and recoveries, which the loop carries out.
func TestGrainWithoutLoop(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	cfg := endpoint.Config{Log: log, Keyring: keyring(t), Policy: policy, Logger: quiet}
	pid := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	mustOK(t, ask(t, sys, pid, cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()})))
	for _, c := range []*internalv1.EndpointCommand{
		cmd("acme", &controlv1.ReplayDeliveryRequest{DeliveryId: "dlv_1"}),
		{TenantId: "acme", Command: &internalv1.EndpointCommand_Recover{Recover: &controlv1.RecoverEndpointRequest{}}},
		{TenantId: "acme", Command: &internalv1.EndpointCommand_GetRecovery{GetRecovery: &controlv1.GetRecoveryRequest{}}},
	} {
		rep := ask(t, sys, pid, c)
		if e := rep.GetError(); e.GetCode() != internalv1.GrainError_CODE_FAILED_PRECONDITION || !strings.Contains(e.GetMessage(), "delivery loop") {
			t.Fatalf("%s: %v", fmt.Sprint(c), rep)
		}
	}
}

// TestGrainRetriedCommands: a command repeated with its request id (its
// first answer was lost) is answered as the first run answered, and
// changes nothing again: a create answers the endpoint and its secret (not
// ALREADY_EXISTS), a rotation the secret it made (not a second rotation),
// a deletion the deleted endpoint (not NOT_FOUND). A new activation
// recognises the request ids from the stream.
func TestGrainRetriedCommands(t *testing.T) {
	log := openLog(t)
	sys := newSystem(t)
	cfg := endpoint.Config{Log: log, Keyring: keyring(t), Policy: policy, Now: (&clock{now: t0}).Now, Logger: quiet}
	pid := sys.Root.Spawn(endpoint.Props(cfg, "ep_1"))
	with := func(c *internalv1.EndpointCommand, id string) *internalv1.EndpointCommand { c.RequestId = id; return c }

	create := with(cmd("acme", &controlv1.CreateEndpointRequest{Settings: settings()}), "req_create")
	first := mustOK(t, ask(t, sys, pid, create))
	again := mustOK(t, ask(t, sys, pid, create))
	if first.GetSecret() == "" || again.GetSecret() != first.GetSecret() || again.GetEndpoint().GetConfigVersion() != 1 {
		t.Fatalf("retried create answered %v, want the first answer %v", again, first)
	}
	rotate := with(cmd("acme", &controlv1.RotateSecretRequest{}), "req_rotate")
	rotated := mustOK(t, ask(t, sys, pid, rotate))
	if err := sys.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	pid = sys.Root.Spawn(endpoint.Props(cfg, "ep_1")) // a new activation
	if rep := mustOK(t, ask(t, sys, pid, rotate)); rep.GetSecret() != rotated.GetSecret() || len(rep.GetEndpoint().GetSecrets()) != 2 {
		t.Fatalf("retried rotation answered %v, want the first one's secret and two live secrets", rep)
	}
	del := with(cmd("acme", &controlv1.DeleteEndpointRequest{}), "req_delete")
	mustOK(t, ask(t, sys, pid, del))
	if rep := mustOK(t, ask(t, sys, pid, del)); rep.GetEndpoint().GetStatus() != controlv1.Endpoint_STATUS_DELETED {
		t.Fatalf("retried delete answered %v", rep)
	}
	if got := types(readStream(t, log, "ep_1")); got != "EndpointCreated,SecretRotated,EndpointDeleted" {
		t.Fatalf("events %s", got)
	}
}
