package client

import (
	"cmp"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultAddr is the address of a node on the same machine, as `hookline
// serve` binds by default.
const DefaultAddr = "127.0.0.1:7070"

// Config configures a Client. The zero value talks to DefaultAddr without a
// token, in plaintext (loopback), with the documented defaults below.
type Config struct {
	// Addr is the node's gRPC address, host:port (or a gRPC target such
	// as dns:///host:port). Default DefaultAddr.
	Addr string
	// Token is a tenant's API key or the admin token, sent as a bearer
	// token on every call.
	Token string

	// TLS, if set, is the whole TLS configuration (client certificates,
	// server name, roots); it is cloned.
	TLS *tls.Config
	// CAFile, if set, is a PEM file of the CA certificates to trust (and
	// only those), for a node whose certificate a private CA signed.
	CAFile string
	// Plaintext turns TLS off for any host. Without it (and without TLS or
	// CAFile) a loopback address is plaintext and any other is TLS with
	// the system's roots.
	Plaintext bool

	// AttemptTimeout bounds each attempt of a call, within the caller's
	// own deadline. Default 15 s.
	AttemptTimeout time.Duration
	// MaxAttempts bounds the attempts of a retried call; 1 turns retries
	// off. Default 4.
	MaxAttempts int
	// BackoffBase and BackoffCap shape the wait before a retry: a random
	// duration up to BackoffBase·2^(n-1), at most BackoffCap. Defaults
	// 100 ms and 2 s.
	BackoffBase, BackoffCap time.Duration

	// MaxBatch is the most events one PublishBatch request carries: the
	// server's limit (its default is 100). Default 100.
	MaxBatch int
	// MaxBatchBytes is the most bytes of events one PublishBatch request
	// carries. Default 8 MiB, half the server's 16 MiB limit on a message.
	MaxBatchBytes int

	// DialOptions are added to the connection's (interceptors, a custom
	// dialer); the transport security above still applies.
	DialOptions []grpc.DialOption
	// Logger receives a debug line for each retry; nil discards.
	Logger *slog.Logger
}

// Validate reports the first invalid setting.
func (c *Config) Validate() error {
	switch {
	case c.Plaintext && (c.TLS != nil || c.CAFile != ""):
		return errors.New("client: Config.Plaintext excludes TLS and CAFile: choose plaintext or TLS")
	case c.TLS != nil && c.CAFile != "":
		return errors.New("client: Config.TLS and CAFile both set: put the CA in TLS.RootCAs, or use CAFile alone")
	case c.AttemptTimeout < 0, c.MaxAttempts < 0, c.BackoffBase < 0, c.BackoffCap < 0, c.MaxBatch < 0, c.MaxBatchBytes < 0:
		return errors.New("client: AttemptTimeout, MaxAttempts, BackoffBase, BackoffCap, MaxBatch and MaxBatchBytes must not be negative")
	case strings.ContainsAny(c.Token, "\r\n"):
		return errors.New("client: Config.Token has a line break: give the key or token alone")
	}
	return nil
}

func (c *Config) withDefaults() {
	c.Addr = cmp.Or(c.Addr, DefaultAddr)
	c.AttemptTimeout = cmp.Or(c.AttemptTimeout, 15*time.Second)
	c.MaxAttempts = cmp.Or(c.MaxAttempts, 4)
	c.BackoffBase = cmp.Or(c.BackoffBase, 100*time.Millisecond)
	c.BackoffCap = cmp.Or(c.BackoffCap, 2*time.Second)
	c.MaxBatch = cmp.Or(c.MaxBatch, 100)
	c.MaxBatchBytes = cmp.Or(c.MaxBatchBytes, 8<<20)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
}

// credentials returns the transport security that the Config asks for.
func (c *Config) credentials() (credentials.TransportCredentials, error) {
	switch {
	case c.TLS != nil:
		return credentials.NewTLS(c.TLS.Clone()), nil
	case c.CAFile != "":
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("client: read CA file: %w", err)
		}
		roots := x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: CA file %s holds no PEM certificate", c.CAFile)
		}
		return credentials.NewTLS(&tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}), nil
	case c.Plaintext || isLoopback(c.Addr):
		return insecure.NewCredentials(), nil
	}
	return credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12}), nil
}

// isLoopback reports whether addr (host:port, or a gRPC target such as
// dns:///host:port) names this machine: localhost or a loopback IP.
func isLoopback(addr string) bool {
	if i := strings.LastIndexByte(addr, '/'); i >= 0 {
		addr = addr[i+1:]
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
