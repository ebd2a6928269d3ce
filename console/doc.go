// Package console serves Hookline's web console and its embeddable tenant
// portal: plain HTML, CSS and JavaScript modules embedded in the binary
// (go:embed), no build step, served by every node under /console/ on the
// REST listener. The pages call only the public REST API, with the bearer
// token the user pasted or the portal link carried, held in memory:
//
//	browser ─▶ /console/ (this package: files, security headers)
//	        └▶ /v1/…     (control: the same API as everyone)
//
// # Security
//
//   - Content-Security-Policy: scripts, styles and connections from this
//     origin only, no inline script or style, no plugins, Trusted Types
//     required (the code builds the DOM with textContent, never HTML
//     strings), frame-ancestors 'none' except for the portal page, which
//     the operator's allowed origins (Config.PortalOrigins) may frame.
//   - CSRF: the API takes credentials only from the Authorization header,
//     which the page's code sets from the token it holds in memory; the
//     browser never attaches it on its own (no cookie, no HTTP auth), and
//     the API sends no CORS headers, so no other site can make a request
//     that carries it.
//   - A portal link carries its token in the URL fragment (#token=…),
//     which browsers never send to a server or in a Referer; the page
//     takes it out of the address bar at once.
package console
