package console_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// update rewrites the screenshots in docs/console, like golden files: run
// go test ./console -run TestConsole -update.
var update = flag.Bool("update", false, "rewrite the screenshots in docs/console")

// chromiumFlags are the flags of every headless Chromium: no sandbox (CI
// runs as root), no GPU, and nothing that reaches for the network on its
// own (the machine has no internet).
var chromiumFlags = []chromedp.ExecAllocatorOption{
	chromedp.Flag("headless", true),
	chromedp.Flag("no-sandbox", true),
	chromedp.Flag("disable-gpu", true),
	chromedp.Flag("disable-quic", true),
	chromedp.Flag("no-first-run", true),
	chromedp.Flag("no-default-browser-check", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.Flag("disable-dev-shm-usage", true),
	chromedp.Flag("disable-extensions", true),
	chromedp.Flag("hide-scrollbars", true),
	chromedp.Flag("mute-audio", true),
	chromedp.WindowSize(1280, 900),
}

// chromium finds Debian's chromium. Outside CI a machine without it skips
// the browser tests, saying so; in CI (CI set) it is a failure, since
// .ci/run installs it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("chromium is not installed: .ci/run installs Debian's chromium package")
	}
	t.Skip("SKIPPED: the browser tests need Chromium (apt-get install chromium); none found on PATH")
	return ""
}

// browser is one headless Chromium with a fresh profile. It records the
// page's uncaught exceptions, console errors and the browser's own error
// log (a CSP violation is one), which fail the test at its end.
type browser struct {
	ctx    context.Context
	mu     sync.Mutex
	errors []string
}

type step = chromedp.Action[chromedp.Void]

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(chromium(t)), chromedp.UserDataDir(t.TempDir())}, chromiumFlags...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancelCtx := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	b.ctx = ctx
	enableLog := chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, cdplog.Enable, cdp.Empty{})
		return err
	})
	if err := chromedp.Do(ctx, enableLog); err != nil {
		cancelCtx()
		cancelAlloc()
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("browser: %s", e)
		}
	})
	return b
}

func (b *browser) listen(ev any) {
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.fail("exception: " + msg)
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var args []string
			for _, a := range ev.Args {
				args = append(args, a.Description+string(a.Value))
			}
			b.fail("console.error: " + strings.Join(args, " "))
		}
	case *cdplog.EventEntryAdded:
		// Failed requests are the tests' own doing (403s they provoke);
		// everything else at error level is a fault of the page.
		if e := ev.Entry; e.Level == cdplog.EntryLevelError && e.Source != cdplog.EntrySourceNetwork {
			b.fail(fmt.Sprintf("%s: %s", e.Source, e.Text))
		}
	}
}

// sawError reports whether an error containing s was recorded.
func (b *browser) sawError(s string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		if strings.Contains(e, s) {
			return true
		}
	}
	return false
}

// forget drops the recorded errors containing s: a test that provokes
// them on purpose.
func (b *browser) forget(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.errors[:0]
	for _, e := range b.errors {
		if !strings.Contains(e, s) {
			kept = append(kept, e)
		}
	}
	b.errors = kept
}

func (b *browser) fail(msg string) {
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// run runs steps with a deadline, failing the test with what was being
// done.
func (b *browser) run(t *testing.T, what string, steps ...step) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		main, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.getElementById("main")?.innerText ?? ""`))
		if len(main) > 600 {
			main = main[:600] + "…"
		}
		t.Fatalf("%s: %v\npage %s shows:\n%s", what, err, loc, main)
	}
}

// waitFor polls a JavaScript condition in the page until it is true.
func waitFor(cond string) step {
	return chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(40*time.Second))
}

// text reads a JavaScript expression's string value.
func (b *browser) text(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 45*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return s
}

// screenshot writes the page as docs/console/name.png when -update is set:
// the whole page, or with viewport only what the window shows.
func (b *browser) screenshot(t *testing.T, name string, viewport ...bool) {
	t.Helper()
	if !*update {
		return
	}
	shot := chromedp.FullScreenshot(100)
	if len(viewport) > 0 && viewport[0] {
		shot = chromedp.CaptureScreenshot()
	}
	png, err := chromedp.Run(b.ctx, shot)
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, name+".png"))
}

// js quotes s as a JavaScript string literal.
func js(s string) string { return fmt.Sprintf("%q", s) }
