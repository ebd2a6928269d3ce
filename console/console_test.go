package console_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/hookline/hookline/console"
)

func get(t *testing.T, h http.Handler, path string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Result()
}

func TestHeaders(t *testing.T) {
	h, err := console.Handler(console.Config{PortalOrigins: []string{"https://app.example.com", "https://*.shop.example"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, ancestors, frameOptions, contentType string
	}{
		{name: "console", path: "/console/", ancestors: "frame-ancestors 'none'", frameOptions: "DENY", contentType: "text/html"},
		{name: "portal", path: "/console/portal", ancestors: "frame-ancestors https://app.example.com https://*.shop.example", contentType: "text/html"},
		{name: "script", path: "/console/app.js", ancestors: "frame-ancestors 'none'", frameOptions: "DENY", contentType: "text/javascript"},
		{name: "style", path: "/console/console.css", ancestors: "frame-ancestors 'none'", frameOptions: "DENY", contentType: "text/css"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := get(t, h, tc.path)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", tc.path, res.Status)
			}
			csp := res.Header.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "default-src 'none'", "require-trusted-types-for 'script'", tc.ancestors} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("CSP %q allows inline or eval", csp)
			}
			if got := res.Header.Get("X-Frame-Options"); got != tc.frameOptions {
				t.Errorf("X-Frame-Options = %q, want %q", got, tc.frameOptions)
			}
			if got := res.Header.Get("Content-Type"); !strings.HasPrefix(got, tc.contentType) {
				t.Errorf("Content-Type = %q, want %s", got, tc.contentType)
			}
			if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Referrer-Policy") != "no-referrer" {
				t.Errorf("headers = %v", res.Header)
			}
		})
	}
}

var handlerAttr = regexp.MustCompile(`\son[a-z]+=`)

// TestPagesHaveNoInlineScript: every script is a module file of this
// origin, which the CSP requires; an inline one would be refused in the
// browser.
func TestPagesHaveNoInlineScript(t *testing.T) {
	h, err := console.Handler(console.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/console/", "/console/portal"} {
		b, _ := io.ReadAll(get(t, h, p).Body)
		page := string(b)
		if strings.Count(page, "<script") != 1 || !strings.Contains(page, `<script type="module" src="/console/app.js"></script>`) ||
			strings.Contains(page, "style=") || handlerAttr.MatchString(page) {
			t.Errorf("%s has inline script or style:\n%s", p, page)
		}
	}
	if res := get(t, h, "/console/nope.js"); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown file: %s", res.Status)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/console/", nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

func TestOrigins(t *testing.T) {
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{origin: "https://app.example.com", ok: true},
		{origin: "http://localhost:3000", ok: true},
		{origin: "https://*.example.com", ok: true},
		{origin: "https://app.example.com/", ok: true},
		{origin: "https://app.example.com/path", ok: false},
		{origin: "app.example.com", ok: false},
		{origin: "javascript:alert(1)", ok: false},
		{origin: "https://a.example.com; script-src *", ok: false},
		{origin: "https://a.*.example.com", ok: false},
		{origin: "https://user@example.com", ok: false},
		{origin: "*", ok: false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			err := console.Config{PortalOrigins: []string{tc.origin}}.Validate()
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, console.ErrOrigin)) {
				t.Errorf("Validate(%q) = %v, want ok=%v", tc.origin, err, tc.ok)
			}
		})
	}
}
