package e2e_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/hookline/hookline/attempt"
	"github.com/hookline/hookline/node"
	"github.com/hookline/hookline/proto/gen/hookline/v1/controlv1"
)

// natsServer is a nats-server with JetStream on loopback, its store in a
// directory of the test, restartable on the same port and store.
type natsServer struct {
	t    *testing.T
	bin  string
	port int
	dir  string
	cmd  *exec.Cmd
}

// startNATS starts nats-server (Debian's package; .ci/run installs it).
// Without it the test skips, or fails when CI is set.
func startNATS(t *testing.T) *natsServer {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/nats-server"); serr != nil {
			if os.Getenv("CI") == "" {
				t.Skip("nats-server is not installed (apt-get install nats-server)")
			}
			t.Fatalf("nats-server is not installed (apt-get install nats-server; .ci/run does): %v", err)
		}
		bin = "/usr/sbin/nats-server"
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	s := &natsServer{t: t, bin: bin, port: port, dir: t.TempDir()}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func (s *natsServer) url() string { return "nats://127.0.0.1:" + strconv.Itoa(s.port) }

func (s *natsServer) start() {
	s.t.Helper()
	s.cmd = exec.Command(s.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(s.port), "-js", "-sd", filepath.Join(s.dir, "js"))
	s.cmd.Stdout, s.cmd.Stderr = nil, nil
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start nats-server: %v", err)
	}
	eventually(s.t, 20*time.Second, "nats-server accepting connections", func() bool {
		nc, err := nats.Connect(s.url(), nats.Timeout(500*time.Millisecond))
		if err != nil {
			return false
		}
		nc.Close()
		return true
	})
}

// stop kills the server (SIGKILL) and waits for it.
func (s *natsServer) stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// TestNATSDestination delivers through a node to a NATS JetStream subject:
// every delivery is stored once in the stream, with the delivery id as
// Nats-Msg-Id and the signature headers as message headers, verifiable
// like a webhook; a replay is dropped by the stream as a repeat; with the
// server down for 10 s, deliveries retry and succeed once it is back.
func TestNATSDestination(t *testing.T) {
	ns := startNATS(t)
	n := startE2E(t, node.Config{Schedule: attempt.Schedule{Base: 200 * time.Millisecond, Cap: time.Second, MaxAttempts: 100}})
	c := n.tenant(t, "acme", nil)

	nc, err := nats.Connect(ns.url(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HOOKS", Subjects: []string{"hooks.>"}, Duplicates: 10 * time.Minute}); err != nil {
		t.Fatalf("create the stream: %v", err)
	}
	created, err := c.endpoints.CreateEndpoint(c.ctx(), &controlv1.CreateEndpointRequest{EndpointId: "ep_nats", Settings: &controlv1.EndpointSettings{
		Url: ns.url() + "/hooks.orders", EventTypes: []string{"order.paid"}, RatePerSecond: 1000, Burst: 100, MaxInFlight: 20,
	}})
	if err != nil {
		t.Fatalf("create the endpoint: %v", err)
	}
	wh, err := standardwebhooks.NewWebhook(created.GetSecret())
	if err != nil {
		t.Fatal(err)
	}

	stored := func() map[string]int {
		out := map[string]int{}
		st, err := js.Stream(ctx, "HOOKS")
		if err != nil {
			return out
		}
		info, err := st.Info(ctx)
		if err != nil {
			return out
		}
		for seq := uint64(1); seq <= info.State.LastSeq; seq++ {
			m, err := st.GetMsg(ctx, seq)
			if err != nil {
				continue
			}
			id := m.Header.Get(jetstream.MsgIDHeader)
			out[id]++
			if err := wh.Verify(m.Data, http.Header(m.Header)); err != nil {
				t.Errorf("message %d (%s) does not verify: %v", seq, id, err)
			}
		}
		return out
	}
	var ids []string
	for i := range 200 {
		ids = append(ids, c.publish(t, fmt.Sprintf("paid_%03d", i), "order.paid")...)
	}
	all := func(ids []string) func() bool {
		return func() bool {
			got := stored()
			for _, id := range ids {
				if got[id] != 1 {
					return false
				}
			}
			return true
		}
	}
	eventually(t, 60*time.Second, "200 deliveries stored in the stream", all(ids))

	// A replay publishes the same Nats-Msg-Id: the stream drops it.
	if _, err := c.deliveries.ReplayDelivery(c.ctx(), &controlv1.ReplayDeliveryRequest{DeliveryId: ids[0]}); err != nil {
		t.Fatalf("replay: %v", err)
	}
	eventually(t, 30*time.Second, "the replay's attempt recorded", func() bool {
		d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: ids[0]})
		return err == nil && len(d.GetAttempts()) == 2
	})
	if got := stored(); got[ids[0]] != 1 || len(got) != 200 {
		t.Fatalf("after the replay the stream holds %d messages, %d of the replayed delivery; want 200 and 1", len(got), got[ids[0]])
	}

	// The server down for 10 s: deliveries wait, and succeed once it is
	// back.
	ns.stop()
	down := time.Now()
	var during []string
	for i := range 20 {
		during = append(during, c.publish(t, fmt.Sprintf("down_%02d", i), "order.paid")...)
	}
	eventually(t, 30*time.Second, "a failed attempt while the server is down", func() bool {
		d, err := c.deliveries.GetDelivery(c.ctx(), &controlv1.GetDeliveryRequest{DeliveryId: during[0]})
		return err == nil && d.GetAttemptCount() > 0
	})
	time.Sleep(10*time.Second - time.Since(down)) // the rest of the outage
	ns.start()
	eventually(t, 60*time.Second, "the deliveries held while the server was down", all(during))
	if got := stored(); len(got) != 220 {
		t.Errorf("the stream holds %d distinct deliveries, want 220", len(got))
	}
}
