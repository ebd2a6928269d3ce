package attempt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// OAuth2 is an endpoint's OAuth2 client-credentials grant (RFC 6749 §4.4):
// each attempt carries "Authorization: Bearer <token>" with a token from
// TokenURL. ClientSecret is a secret: never log it.
type OAuth2 struct {
	TokenURL     string
	ClientID     string
	ClientSecret string
	Scopes       []string
	Audience     string
}

// Token cache bounds.
const (
	// DefaultTokenLifetime is how long a token without expires_in is used.
	DefaultTokenLifetime = 5 * time.Minute
	// maxTokenEarly bounds how long before its expiry a token is replaced;
	// a short-lived token is replaced a quarter of its lifetime early.
	maxTokenEarly = 30 * time.Second
	// tokenBackoffMax bounds the pause after failed token requests, during
	// which attempts fail at once without asking the token endpoint.
	tokenBackoffMax = 30 * time.Second
	// maxTokenResponse bounds the token endpoint's answer read.
	maxTokenResponse = 64 << 10
	// tokenTimeout bounds one token request.
	tokenTimeout = 10 * time.Second
)

// TokenError is a failure to get a token: the attempt fails with
// ERROR_CLASS_TOKEN and sends nothing to the receiver.
type TokenError struct {
	msg string
}

func (e *TokenError) Error() string { return e.msg }

// tokens caches client-credentials tokens per key (an endpoint and its
// configuration version): one token request at a time per key, a token
// shared by the key's attempts until shortly before it expires, and, after
// a failed request, none for a backoff that doubles up to tokenBackoffMax.
type tokens struct {
	cache idleCache[*tokenEntry]
}

type tokenEntry struct {
	mu       sync.Mutex // held during a token request: one at a time
	token    string
	replace  time.Time // when to ask for a new one
	retry    time.Time // no request before this after a failure
	failures int
	err      error // the last failure, answered during the backoff
}

func (t *tokens) entry(key string) *tokenEntry {
	e, _ := t.cache.get(key, func() (*tokenEntry, error) { return &tokenEntry{}, nil })
	return e
}

// token returns a token for key: the cached one while it is good (fresh
// false), or a new one from the token endpoint (fresh true). stale, when
// not empty, is a token the receiver refused: it is not answered again.
func (c *Client) token(ctx context.Context, hc *http.Client, key string, grant *OAuth2, stale string, now func() time.Time) (token string, fresh bool, err error) {
	e := c.tokens.entry(key)
	e.mu.Lock()
	defer e.mu.Unlock()
	at := now()
	if e.token != "" && e.token != stale && at.Before(e.replace) {
		return e.token, false, nil
	}
	if e.err != nil && at.Before(e.retry) {
		return "", false, e.err
	}
	tok, lifetime, err := c.fetchToken(ctx, hc, grant)
	if err != nil {
		e.failures++
		pause := backoff(e.failures)
		e.err = &TokenError{msg: fmt.Sprintf("token endpoint: %v (no token request for %v)", err, pause)}
		e.retry = at.Add(pause)
		return "", false, e.err
	}
	e.token, e.failures, e.err = tok, 0, nil
	e.replace = at.Add(lifetime - min(maxTokenEarly, lifetime/4))
	return tok, true, nil
}

// backoff is the pause after n failed token requests: 1 s doubling, at
// most tokenBackoffMax.
func backoff(n int) time.Duration {
	return min(time.Second<<min(n-1, 5), tokenBackoffMax)
}

// fetchToken asks grant's token endpoint for a token, through the egress
// policy, with the client's credentials in HTTP Basic authentication,
// through hc (the endpoint's client certificate, if any).
func (c *Client) fetchToken(ctx context.Context, hc *http.Client, grant *OAuth2) (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, tokenTimeout)
	defer cancel()
	u, err := c.policy.CheckURL(ctx, grant.TokenURL)
	if err != nil {
		return "", 0, err
	}
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(grant.Scopes) > 0 {
		form.Set("scope", strings.Join(grant.Scopes, " "))
	}
	if grant.Audience != "" {
		form.Set("audience", grant.Audience)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, errors.New("cannot build the token request")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	req.SetBasicAuth(url.QueryEscape(grant.ClientID), url.QueryEscape(grant.ClientSecret))
	resp, err := hc.Do(req)
	if err != nil {
		return "", 0, errors.New(errorText(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponse))
	if err != nil {
		return "", 0, fmt.Errorf("reading the answer: %s", errorText(err))
	}
	if resp.StatusCode != http.StatusOK {
		var oe struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(body, &oe)
		if oe.Error != "" && len(oe.Error) <= 64 {
			return "", 0, fmt.Errorf("%s, error %q", statusText(resp.StatusCode), oe.Error)
		}
		return "", 0, errors.New(statusText(resp.StatusCode))
	}
	var tr struct {
		AccessToken string `json:"access_token"`
		TokenType   string `json:"token_type"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.AccessToken == "" {
		return "", 0, errors.New("the answer has no access_token")
	}
	if tr.TokenType != "" && !strings.EqualFold(tr.TokenType, "bearer") {
		return "", 0, fmt.Errorf("token_type %q is not bearer", tr.TokenType)
	}
	lifetime := DefaultTokenLifetime
	if tr.ExpiresIn > 0 {
		lifetime = time.Duration(tr.ExpiresIn) * time.Second
	}
	return tr.AccessToken, lifetime, nil
}
