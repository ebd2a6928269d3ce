package console

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"strings"
)

//go:embed assets
var assets embed.FS

// Path is where the console is served; the portal is at Path + "portal".
const Path = "/console/"

// ErrOrigin means an allowed portal origin is not a bare origin.
var ErrOrigin = errors.New("console: bad portal origin")

// Config configures the console. The zero value serves a portal that no
// other site may frame.
type Config struct {
	// PortalOrigins are the origins allowed to frame the portal
	// (scheme://host[:port], a host may start with "*."), e.g. the
	// producer's https://app.example.com. Empty allows none.
	PortalOrigins []string
}

// Validate reports the first origin that is not scheme://host[:port].
func (c Config) Validate() error {
	for _, o := range c.PortalOrigins {
		if err := checkOrigin(o); err != nil {
			return err
		}
	}
	return nil
}

func checkOrigin(o string) error {
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" ||
		strings.ContainsAny(o, " ;,'\"\t\r\n") {
		return fmt.Errorf("%w %q: give scheme://host[:port], e.g. https://app.example.com", ErrOrigin, o)
	}
	host := u.Hostname()
	if strings.Contains(strings.TrimPrefix(host, "*."), "*") {
		return fmt.Errorf("%w %q: a wildcard may only start the host (*.example.com)", ErrOrigin, o)
	}
	return nil
}

// Handler returns the console's handler, to mount at [Path].
func Handler(cfg Config) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	files, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	ancestors := "'none'"
	if len(cfg.PortalOrigins) > 0 {
		var clean []string
		for _, o := range cfg.PortalOrigins {
			clean = append(clean, strings.TrimSuffix(o, "/"))
		}
		ancestors = strings.Join(clean, " ")
	}
	h := &handler{files: files, static: http.FileServerFS(files), portalAncestors: ancestors}
	return h, nil
}

type handler struct {
	files           fs.FS
	static          http.Handler
	portalAncestors string
}

// csp is the policy of every console response but frame-ancestors.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'; trusted-types 'none'"

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	p := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Path, "/"))
	switch p {
	case "", "/", "/index.html":
		h.page(w, r, "index.html", "'none'")
	case "/portal", "/portal.html":
		h.page(w, r, "portal.html", h.portalAncestors)
	default:
		hd.Set("Content-Security-Policy", csp+"; frame-ancestors 'none'")
		hd.Set("X-Frame-Options", "DENY")
		if strings.HasSuffix(p, ".html") {
			http.NotFound(w, r)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = p
		h.static.ServeHTTP(w, r2)
	}
}

// page serves an HTML page whose frame-ancestors are ancestors.
func (h *handler) page(w http.ResponseWriter, r *http.Request, name, ancestors string) {
	b, err := fs.ReadFile(h.files, name)
	if err != nil {
		http.Error(w, "console page missing from this build", http.StatusInternalServerError)
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", csp+"; frame-ancestors "+ancestors)
	if ancestors == "'none'" {
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}
