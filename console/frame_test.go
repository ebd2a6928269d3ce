package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPortalInAFrame embeds the portal in a producer's page, as a SaaS
// product does: the origin the operator allowed frames it and the portal
// works there; any other origin is refused by the browser.
func TestPortalInAFrame(t *testing.T) {
	chromium(t)
	var src atomic.Pointer[string]
	producer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><html lang="en"><title>Producer</title><h1>Your webhooks</h1>`+
			`<iframe id="portal" title="Webhooks" src="%s" width="1100" height="700"></iframe></html>`, html.EscapeString(*src.Load()))
	}))
	t.Cleanup(producer.Close)
	// The producer at localhost:port is another origin than the node's
	// 127.0.0.1:port, and than itself at 127.0.0.1:port.
	allowed := strings.Replace(producer.URL, "127.0.0.1", "localhost", 1)
	n := startNode(t, allowed)
	link, _ := n.portalLink(t, n.tenant(t, "acme"))
	src.Store(&link)

	t.Run("the allowed origin frames the portal", func(t *testing.T) {
		b := newBrowser(t)
		b.run(t, "open the producer's page", chromedp.Navigate(allowed+"/"), chromedp.WaitVisible(`#portal`))
		fctx := frameOf(t, b, n.base+"/console/portal")
		ctx, cancel := context.WithTimeout(fctx, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(ctx, waitFor(`document.querySelector("h1")?.textContent === "Endpoints"`)); err != nil {
			t.Fatalf("the framed portal did not show its endpoints: %v", err)
		}
	})

	t.Run("another origin is refused", func(t *testing.T) {
		b := newBrowser(t)
		b.run(t, "open the page from another origin", chromedp.Navigate(producer.URL+"/"), chromedp.WaitVisible(`#portal`))
		deadline := time.Now().Add(10 * time.Second)
		for !b.sawError("frame-ancestors") {
			if time.Now().After(deadline) {
				t.Fatal("the browser framed the portal for an origin that is not allowed")
			}
			time.Sleep(50 * time.Millisecond) // poll interval
		}
		b.forget("frame-ancestors") // the refusal is what this test wants
	})
}

// frameOf returns a chromedp context attached to the frame whose URL
// starts with prefix: the portal runs in a frame of its own site (an
// out-of-process frame), a target of its own.
func frameOf(t *testing.T, b *browser, prefix string) context.Context {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		targets, err := chromedp.Targets(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ti := range targets {
			if ti.Type == "iframe" && strings.HasPrefix(ti.URL, prefix) {
				ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(ti.TargetID))
				t.Cleanup(cancel)
				return ctx
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no frame target at %s among %d targets", prefix, len(targets))
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
