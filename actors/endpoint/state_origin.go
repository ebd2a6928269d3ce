package endpoint

import (
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/hookline/hookline/actors/command"
	"github.com/hookline/hookline/attempt"
	hooklinev1 "github.com/hookline/hookline/proto/gen/hookline/v1"
)

// checkSecretsFollowURL refuses an update that moves the endpoint's URL to
// another origin (scheme, host and port) while keeping a secret that was
// given for the old one: the secret headers, and the OAuth2 client secret
// whose bearer token every attempt carries. Whoever may update an endpoint
// could otherwise have its credentials sent to a host of their own; giving
// the secret again, or dropping it, shows they may. old is the current
// configuration, cfg the next one with its URL checked; headersGiven says
// the update names secret_headers, clientSecretGiven that it gives the
// grant's client secret. A broker URL's password follows the same rule in
// [sealURLPassword], which drops it on a new host.
func checkSecretsFollowURL(old, cfg *hooklinev1.EndpointConfig, headersGiven, clientSecretGiven bool) error {
	from, to := origin(old.GetUrl()), origin(cfg.GetUrl())
	if old.GetUrl() == "" || cfg.GetUrl() == "" || from == to {
		return nil
	}
	switch {
	case len(old.GetSealedHeaders()) > 0 && !headersGiven:
		return command.Invalid("settings.secret_headers", "were given for %s and the url moves to %s; give secret_headers again for the new host, or name secret_headers with none to drop them", from, to)
	case old.GetOauth2() != nil && cfg.GetOauth2() != nil && !clientSecretGiven:
		return command.Invalid("settings.auth.oauth2.client_secret", "was given for %s and the url moves to %s, which would receive its tokens; give the client secret again, or remove settings.auth.oauth2", from, to)
	}
	return nil
}

// origin is a URL's scheme, host and port, the port written out when the
// URL leaves it to the scheme: where an attempt's credentials go.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return raw
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		port = strconv.Itoa(defaultPort(scheme))
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// defaultPort is the port a scheme's URL connects to when it names none.
func defaultPort(scheme string) int {
	switch scheme {
	case "http":
		return 80
	case attempt.SchemeNATS:
		return attempt.DefaultNATSPort
	case attempt.SchemeAMQP:
		return attempt.DefaultAMQPPort
	case attempt.SchemeAMQPS:
		return attempt.DefaultAMQPSPort
	}
	return 443
}
