package cluster_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hookline/hookline/cluster"
)

func newSecret(t *testing.T) string {
	t.Helper()
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.StdEncoding.EncodeToString(b)
}

// startSecuredNode starts an in-process node holding secret.
func startSecuredNode(t *testing.T, secret string) *cluster.Node {
	t.Helper()
	secrets, err := cluster.ParseSecrets(secret)
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(nil)
	cfg.Secrets = secrets
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := cluster.Start(ctx, cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { stopNode(t, n) })
	return n
}

// TestSecretKeepsNonMembersOut: a process with another secret, or none,
// does not become a member of a cluster whose members hold the secret; no
// one without the secret completes a call on the cluster port, whatever
// credentials it brings; and members holding the secret form a cluster
// over mutual TLS and encrypted gossip.
//
// The member joins last, and the in-process node stops before it: when a
// member leaves, protoactor writes the remote's block list under its lock,
// while its endpoint reader reads it without the lock on each inbound
// connection (remote.BlockList.IsBlocked), a race the detector reports in
// this process if the child leaves first. See doc.go.
func TestSecretKeepsNonMembersOut(t *testing.T) {
	secret := newSecret(t)
	a := startSecuredNode(t, secret)

	for _, tt := range []struct{ name, secret string }{
		{"a node with another secret", newSecret(t)},
		{"a node with no secret", ""},
	} {
		t.Run(tt.name+" never becomes a member", func(t *testing.T) {
			before := len(a.Members())
			c := startChildWith(t, tt.secret, a.GossipAddress())
			// Several gossip rounds and probes (fastGossip: every 50 and
			// 200 ms) pass without either side seeing the other.
			for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
				if got := c.members(); got != 1 {
					t.Fatalf("the outsider sees %d members", got)
				}
				if got := len(a.Members()); got != before {
					t.Fatalf("the cluster went from %d to %d members", before, got)
				}
			}
		})
	}

	t.Run("the cluster port refuses every call without the secret", func(t *testing.T) {
		selfSigned := selfSignedCert(t)
		for _, tt := range []struct {
			name  string
			creds credentials.TransportCredentials
		}{
			{"plaintext", insecure.NewCredentials()},
			{"TLS without a client certificate", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true})},
			{"TLS with a certificate of its own", credentials.NewTLS(&tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{selfSigned}})},
		} {
			t.Run(tt.name, func(t *testing.T) {
				cc, err := grpc.NewClient(a.Address(), grpc.WithTransportCredentials(tt.creds))
				if err != nil {
					t.Fatal(err)
				}
				defer cc.Close()
				ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
				defer cancel()
				_, err = remote.NewRemotingClient(cc).ListProcesses(ctx, &remote.ListProcessesRequest{Pattern: ""})
				if err == nil {
					t.Fatal("the cluster port answered a caller without the secret")
				}
				stream, err := remote.NewRemotingClient(cc).Receive(ctx)
				if err == nil {
					_, err = stream.Recv()
				}
				if err == nil {
					t.Fatal("the cluster port opened a message stream for a caller without the secret")
				}
				t.Logf("refused: %v", err)
			})
		}
	})
	t.Run("a member with the secret joins and reaches the grains", func(t *testing.T) {
		b := startChildWith(t, secret, a.GossipAddress())
		waitTwo(t, a, b)
		// Requests both ways cross the remote over mutual TLS: some
		// grains live on a, some on b.
		owners := map[string]int{}
		for _, id := range identities(20) {
			where, err := b.ask(id)
			if err != nil {
				t.Fatalf("ask %s through b: %v", id, err)
			}
			owners[where]++
			if _, err := ask(t.Context(), a, id); err != nil {
				t.Fatalf("ask %s through a: %v", id, err)
			}
		}
		if len(owners) != 2 {
			t.Fatalf("grains placed on %v, want both members", owners)
		}
		stopNode(t, a)
	})

}

// selfSignedCert is a client certificate no cluster CA signed.
func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "intruder"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames:    []string{"member.hookline-cluster.invalid"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestParseSecrets(t *testing.T) {
	good := newSecret(t)
	for _, tt := range []struct {
		name, spec string
		want       int
	}{
		{"one", good, 1},
		{"two for a rotation", good + "," + newSecret(t), 2},
		{"url-safe, unpadded", strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(good), "="), 1},
		{"short", base64.StdEncoding.EncodeToString(make([]byte, 16)), 0},
		{"not base64", "not base64!", 0},
		{"empty part", good + ",", 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cluster.ParseSecrets(tt.spec)
			if tt.want == 0 {
				if !errors.Is(err, cluster.ErrSecret) {
					t.Fatalf("ParseSecrets = %v, want ErrSecret", err)
				}
				if strings.Contains(err.Error(), tt.spec) {
					t.Fatalf("error %q repeats the secret", err)
				}
				return
			}
			if err != nil || len(got) != tt.want {
				t.Fatalf("ParseSecrets = %d secrets, %v; want %d", len(got), err, tt.want)
			}
		})
	}
}

func TestReachableAddressNeedsSecret(t *testing.T) {
	cfg := cluster.Config{Host: "10.0.0.5", GossipHost: "10.0.0.5"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "HOOKLINE_CLUSTER_SECRET") {
		t.Fatalf("Validate = %v, want a refusal that names HOOKLINE_CLUSTER_SECRET", err)
	}
	cfg.Insecure = true
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with Insecure = %v", err)
	}
	cfg = cluster.Config{Host: "10.0.0.5", Secrets: [][]byte{make([]byte, 32)}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate with a secret = %v", err)
	}
	if err := (cluster.Config{Secrets: [][]byte{make([]byte, 8)}}).Validate(); err == nil {
		t.Fatal("an 8-byte secret was accepted")
	}
}
