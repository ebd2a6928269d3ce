package cluster

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"time"
)

// MinSecretSize is the least number of bytes of a cluster secret.
const MinSecretSize = 32

// ErrSecret means a cluster secret is malformed: not base64, or shorter
// than [MinSecretSize] bytes.
var ErrSecret = errors.New("cluster: malformed cluster secret")

// memberName is the name every member's certificate carries and every
// member dials: what authenticates a member is its CA, not its address.
const memberName = "member.hookline-cluster.invalid"

// ParseSecrets parses the HOOKLINE_CLUSTER_SECRET format: one or more
// secrets separated by commas, the first current, each the standard or
// URL-safe base64 (padded or not) of at least 32 random bytes. Errors name
// a secret by its position, never by its value.
func ParseSecrets(spec string) ([][]byte, error) {
	var out [][]byte
	for i, part := range strings.Split(spec, ",") {
		part = strings.TrimRight(strings.TrimSpace(part), "=")
		enc := base64.RawStdEncoding
		if strings.ContainsAny(part, "-_") {
			enc = base64.RawURLEncoding
		}
		b, err := enc.DecodeString(part)
		switch {
		case part == "":
			return nil, fmt.Errorf("%w: secret %d is empty (separate secrets with single commas)", ErrSecret, i+1)
		case err != nil:
			return nil, fmt.Errorf("%w: secret %d is not base64 (generate one with: head -c 32 /dev/urandom | base64)", ErrSecret, i+1)
		case len(b) < MinSecretSize:
			return nil, fmt.Errorf("%w: secret %d is %d bytes; use at least %d random bytes", ErrSecret, i+1, len(b), MinSecretSize)
		}
		out = append(out, b)
	}
	return out, nil
}

// memberCredentials are what a member proves and checks, all derived from the
// cluster's secrets (the first current):
//
//   - a cluster CA per secret: an ed25519 key derived from the secret with
//     HKDF-SHA256 and a self-signed certificate. Every member trusts the CAs
//     of all its secrets, and issues itself, at start, a certificate for a
//     fresh ed25519 key, signed by the current secret's CA. The remote
//     (protoactor's gRPC) runs TLS 1.3 with client certificates required
//     both ways: a process that does not hold a secret cannot present a
//     certificate the members accept, nor complete a handshake, nor read or
//     send a message.
//   - a gossip key per secret (HKDF-SHA256, another label): memberlist
//     encrypts and authenticates every packet and stream with it.
//
// One secret thus gives mutual authentication and encryption of all the
// cluster's own traffic, with no certificate to provision. Rolling a new
// secret in is three restarts of every member: "old,new", then "new,old",
// then "new".
type memberCredentials struct {
	server, client *tls.Config
	gossipKeys     [][]byte
	caIDs          []string // for the log: which CAs are trusted
}

func newCredentials(secrets [][]byte, now time.Time) (*memberCredentials, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("%w: none given", ErrSecret)
	}
	pool := x509.NewCertPool()
	c := &memberCredentials{}
	var current *x509.Certificate
	var currentKey ed25519.PrivateKey
	for i, secret := range secrets {
		if len(secret) < MinSecretSize {
			return nil, fmt.Errorf("%w: secret %d is %d bytes; use at least %d", ErrSecret, i+1, len(secret), MinSecretSize)
		}
		ca, key, err := clusterCA(secret)
		if err != nil {
			return nil, err
		}
		pool.AddCert(ca)
		sum := sha256.Sum256(ca.Raw)
		c.caIDs = append(c.caIDs, hex.EncodeToString(sum[:6]))
		if i == 0 {
			current, currentKey = ca, key
		}
		gk, err := hkdf.Key(sha256.New, secret, []byte("hookline cluster"), "memberlist aes-256-gcm v1", 32)
		if err != nil {
			return nil, fmt.Errorf("cluster: derive gossip key: %w", err)
		}
		c.gossipKeys = append(c.gossipKeys, gk)
	}
	leaf, err := memberCertificate(current, currentKey, now)
	if err != nil {
		return nil, err
	}
	c.server = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{leaf},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
	}
	c.client = &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{leaf},
		RootCAs:      pool,
		ServerName:   memberName,
	}
	return c, nil
}

// clusterCA derives the CA of one secret: its key, from HKDF, and a
// self-signed certificate made the same by every member (ed25519 signs
// deterministically, and every field is fixed).
func clusterCA(secret []byte) (*x509.Certificate, ed25519.PrivateKey, error) {
	seed, err := hkdf.Key(sha256.New, secret, []byte("hookline cluster"), "ca ed25519 v1", ed25519.SeedSize)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: derive CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "hookline cluster CA"},
		NotBefore:             time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC),
		NotAfter:              time.Date(2120, 1, 1, 0, 0, 0, 0, time.UTC),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster: CA certificate: %w", err)
	}
	return ca, key, nil
}

// memberCertificate issues this member's certificate: a fresh key, valid
// for both ends of a connection, signed by the CA.
func memberCertificate(ca *x509.Certificate, caKey ed25519.PrivateKey, now time.Time) (tls.Certificate, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: member key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: member serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "hookline cluster member"},
		DNSNames:     []string{memberName},
		NotBefore:    now.Add(-time.Hour), // members' clocks differ a little
		NotAfter:     now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, pub, caKey)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("cluster: member certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: priv}, nil
}
