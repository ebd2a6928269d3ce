package endpoint

import (
	"fmt"
	"net/url"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
	"github.com/hookline/hookline/seal"
)

// MaxURLPasswordLen bounds the password or token of a broker URL.
const MaxURLPasswordLen = 1024

// urlCredentials is what a broker URL given in a command says about its
// credentials once its secret part is taken out.
type urlCredentials struct {
	stored string // the URL without its secret part
	secret string // the password, or a NATS token given as the user alone
	// given: the URL says what the secret is (a password, a token, or an
	// empty userinfo that drops it); otherwise it keeps the current one
	// when the scheme, host and user are the same.
	given bool
}

// splitURLCredentials takes the secret part out of a broker URL's
// credentials: user:password@ keeps user@ and the password; a NATS token@
// keeps no userinfo and the token; an empty userinfo (@) drops the
// credentials. Other URLs are kept as they are.
func splitURLCredentials(raw string) urlCredentials {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil || !attempt.IsBrokerScheme(u.Scheme) {
		return urlCredentials{stored: raw}
	}
	user := u.User.Username()
	password, hasPassword := u.User.Password()
	out := urlCredentials{given: true}
	switch {
	case hasPassword && user != "":
		u.User, out.secret = url.User(user), password
	case hasPassword:
		u.User, out.secret = nil, password
	case user != "" && u.Scheme == attempt.SchemeNATS:
		u.User, out.secret = nil, user // a token
	case user != "":
		out.given = false // a user without a password: keep the current one
	default:
		u.User = nil // @ alone: no credentials
	}
	out.stored = u.String()
	return out
}

// sealURLPassword stores in cfg the URL without its secret part and that
// part sealed: a new one when the URL gives it, old's when the URL names
// the same scheme, host and user without one.
func sealURLPassword(endpointID string, cfg, old *hooklinev1.EndpointConfig, env Env) error {
	creds := splitURLCredentials(cfg.GetUrl())
	cfg.Url, cfg.UrlPassword = creds.stored, nil
	switch {
	case !creds.given:
		if sameServerAndUser(creds.stored, old.GetUrl()) {
			cfg.UrlPassword = old.GetUrlPassword()
		}
		return nil
	case creds.secret == "":
		return nil
	case len(creds.secret) > MaxURLPasswordLen:
		return command.Invalid("settings.url", "the URL's password is %d bytes; use at most %d", len(creds.secret), MaxURLPasswordLen)
	}
	v, err := sealValue(creds.secret, seal.URLPasswordAAD(endpointID), old.GetUrlPassword(), env)
	cfg.UrlPassword = v
	return err
}

// sameServerAndUser reports whether two stored URLs name the same scheme,
// host and user.
func sameServerAndUser(a, b string) bool {
	ua, errA := url.Parse(a)
	ub, errB := url.Parse(b)
	return errA == nil && errB == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host &&
		ua.User.Username() == ub.User.Username()
}

// URLPassword opens the password (or token) of the endpoint's broker URL;
// "" when it has none. It is a secret: never log it.
func (s *State) URLPassword(kr *seal.Keyring) (string, error) {
	v := s.Config.GetUrlPassword()
	if v == nil {
		return "", nil
	}
	plain, err := kr.Open(v.GetMasterKeyId(), v.GetNonce(), v.GetCiphertext(), seal.URLPasswordAAD(s.EndpointID))
	if err != nil {
		return "", fmt.Errorf("open the URL password of %s: %w", s.EndpointID, err)
	}
	return string(plain), nil
}
