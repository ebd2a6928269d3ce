package main

import (
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// What `hookline receive` can ask of a sender besides a signature, to try
// out an endpoint's mutual TLS or OAuth2 grant on one machine: TLS with a
// client certificate its CA signed, and a bearer token from the token
// endpoint it serves itself.

// receiverTLS is the TLS of a receiver: its certificate, and, with a
// client CA, a client certificate required of every sender.
func receiverTLS(certFile, keyFile, clientCA string) (*tls.Config, error) {
	if certFile == "" && keyFile == "" && clientCA == "" {
		return nil, nil
	}
	if certFile == "" || keyFile == "" {
		return nil, errors.New("--tls-cert and --tls-key go together (and --client-ca needs them)")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert, --tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if clientCA != "" {
		pem, err := os.ReadFile(clientCA)
		if err != nil {
			return nil, fmt.Errorf("--client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--client-ca: %s holds no PEM certificate", clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// tokenIssuer is a receiver's OAuth2 token endpoint (client credentials,
// RFC 6749 §4.4, the client authenticated with HTTP Basic): it issues
// bearer tokens to one client, and the receiver accepts webhooks that
// carry one. Safe for concurrent use.
type tokenIssuer struct {
	clientID, secret string

	mu     sync.Mutex // guards tokens
	tokens map[string]bool
}

// newTokenIssuer parses --oauth2-client ID:SECRET.
func newTokenIssuer(arg string) (*tokenIssuer, error) {
	if arg == "" {
		return nil, nil
	}
	id, secret, ok := strings.Cut(arg, ":")
	if !ok || id == "" || secret == "" {
		return nil, errors.New("--oauth2-client: give CLIENT_ID:CLIENT_SECRET, e.g. hookline:s3cret")
	}
	return &tokenIssuer{clientID: id, secret: secret, tokens: map[string]bool{}}, nil
}

// tokenLifetime is how long an issued token is valid, as its answer says.
const tokenLifetime = time.Hour

// ServeHTTP answers a token request: a token for the client's credentials,
// 401 for others.
func (t *tokenIssuer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	_ = req.ParseForm()
	id, secret, ok := req.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	}
	w.Header().Set("Content-Type", "application/json")
	switch {
	case req.Method != http.MethodPost || req.PostForm.Get("grant_type") != "client_credentials":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"unsupported_grant_type"}`)
		return
	case !ok || subtle.ConstantTimeCompare([]byte(id), []byte(t.clientID)) != 1 || subtle.ConstantTimeCompare([]byte(secret), []byte(t.secret)) != 1:
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
		return
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	token := "tok_" + hex.EncodeToString(b)
	t.mu.Lock()
	t.tokens[token] = true
	t.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": int(tokenLifetime.Seconds())})
}

// valid reports whether an Authorization header carries a token it issued.
func (t *tokenIssuer) valid(authorization string) bool {
	token, ok := strings.CutPrefix(authorization, "Bearer ")
	t.mu.Lock()
	defer t.mu.Unlock()
	return ok && t.tokens[token]
}
