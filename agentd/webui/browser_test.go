package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds headless Chromium: $CONVLOG_CHROMIUM, else Debian's
// /usr/bin/chromium, else chromium on $PATH. Without it the test fails in
// CI (CI=true: .ci/run installs Chromium, and the page is only tested in a
// real browser) and, on a developer's fresh clone, is skipped with the
// command that installs it.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CONVLOG_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("CONVLOG_CHROMIUM=%s: %v", p, err)
		}
		return p
	}
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	msg := "the web page's end-to-end test needs headless Chromium, and /usr/bin/chromium is missing: " +
		"install Debian's chromium (apt-get install -y chromium; .ci/run does) or set CONVLOG_CHROMIUM to a Chromium binary"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// browser is one headless Chromium tab on a base URL. Page exceptions are
// collected and fail the test; console output is printed when a step fails.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string

	mu         sync.Mutex
	console    []string
	exceptions []string
}

// stepTimeout bounds one wait; the machine may be loaded.
const stepTimeout = 30 * time.Second

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	path := chromiumPath(t)
	b := &browser{t: t, base: base}
	// The flags the workplace's machines need: no background connections
	// (the network is closed), no GPU, no sandbox (tests run as root), and a
	// fresh profile (chromedp makes a temporary --user-data-dir).
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithListener(b.listen))
	t.Cleanup(func() {
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		_ = chromedp.Cancel(cctx)
		cancel()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		if len(b.exceptions) > 0 {
			t.Errorf("the page threw %d exception(s):\n%s", len(b.exceptions), strings.Join(b.exceptions, "\n"))
		}
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium (%s): %v", path, err)
	}
	b.ctx = ctx
	b.do(chromedp.EmulateViewport(1280, 900))
	return b
}

func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		var parts []string
		for _, a := range e.Args {
			if len(a.Value) > 0 {
				parts = append(parts, string(a.Value))
			} else {
				parts = append(parts, a.Description)
			}
		}
		b.console = append(b.console, fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		msg := d.Text
		if d.Exception != nil {
			msg += " " + d.Exception.Description
		}
		b.exceptions = append(b.exceptions, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber))
	}
}

// fail stops the test with what the page shows and logged.
func (b *browser) fail(format string, args ...any) {
	b.t.Helper()
	text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 3000) : ""`))
	loc, _ := chromedp.Run(b.ctx, chromedp.Location())
	b.mu.Lock()
	logs := strings.Join(b.console, "\n")
	exc := strings.Join(b.exceptions, "\n")
	b.mu.Unlock()
	b.t.Fatalf("%s\n--- page %s:\n%s\n--- console:\n%s\n--- exceptions:\n%s", fmt.Sprintf(format, args...), loc, text, logs, exc)
}

// do runs actions, each step bounded by stepTimeout.
func (b *browser) do(actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.fail("browser step failed: %v", err)
	}
}

// eval evaluates js (awaiting a promise) and decodes its value into T.
func eval[T any](b *browser, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("evaluate %q: %v", js, err)
	}
	return v
}

// waitFor polls the JavaScript predicate js until it is true; what says
// what the test waits for, for the failure message.
func (b *browser) waitFor(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+js+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.fail("timed out after %v waiting for %s (last error: %v)", stepTimeout, what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *browser) navigate(path string) {
	b.t.Helper()
	b.do(chromedp.Navigate(b.base + path))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do(chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// typeInto focuses a field and types text ("\r" is the Enter key).
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	b.do(chromedp.SendKeys(chromedp.CSS(sel), text, chromedp.NodeVisible))
}

// keys sends key presses to the focused element.
func (b *browser) keys(keys string) {
	b.t.Helper()
	b.do(chromedp.KeyEvent(keys))
}

// screenshot saves the viewport (or the whole page) as docs/name when
// -update-screenshots is set.
func (b *browser) screenshot(name string, full bool) {
	b.t.Helper()
	if !*updateScreenshots {
		return
	}
	// Let the last paint settle (caret blink, scroll).
	time.Sleep(300 * time.Millisecond)
	shot := chromedp.CaptureScreenshot()
	if full {
		shot = chromedp.FullScreenshot(100) // 100: PNG
	}
	buf, err := chromedp.Run(b.ctx, shot)
	if err != nil {
		b.fail("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "docs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("wrote %s", filepath.Join(dir, name))
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	q, _ := json.Marshal(s)
	return string(q)
}

// checkAccessible fails the test when a visible control of the page has no
// accessible name (a label, aria-label or text), an image has no alt, or
// ids repeat: the basics a screen reader and keyboard users need.
func (b *browser) checkAccessible(where string) {
	b.t.Helper()
	problems := eval[[]string](b, `(() => {
  const out = [];
  const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const name = (el) => (el.getAttribute("aria-label") || "").trim() ||
    (el.labels && [...el.labels].map((l) => l.textContent).join(" ").trim()) ||
    (el.getAttribute("aria-labelledby") || "").split(" ").map((id) => document.getElementById(id)?.textContent || "").join(" ").trim() ||
    (el.tagName !== "INPUT" && el.tagName !== "SELECT" && el.tagName !== "TEXTAREA" ? el.textContent.trim() : "");
  for (const el of document.querySelectorAll("input, select, textarea, button, a[href], [role=button]")) {
    if (visible(el) && !name(el)) out.push(el.outerHTML.slice(0, 120) + " has no accessible name");
  }
  for (const img of document.querySelectorAll("img")) if (!img.hasAttribute("alt")) out.push(img.outerHTML + " has no alt");
  const ids = {};
  for (const el of document.querySelectorAll("[id]")) ids[el.id] = (ids[el.id] || 0) + 1;
  for (const [id, n] of Object.entries(ids)) if (n > 1) out.push("id " + id + " is used " + n + " times");
  if (document.querySelectorAll("h1").length !== 1) out.push("the view should have one h1");
  if (!document.querySelector("main")) out.push("no main landmark");
  return out;
})()`)
	if len(problems) > 0 {
		b.fail("accessibility problems in %s:\n%s", where, strings.Join(problems, "\n"))
	}
}
