// Package dashboard_test drives the dashboard in Debian's Chromium (headless,
// through the DevTools protocol with chromedp) against a whole node started
// in process on loopback ports: the pages as a user sees them, the DNS
// queries a real client makes, axe-core's accessibility rules on every page,
// and no console error or request to another origin.
package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

const adminPassword = "correct horse battery staple"

// axeSource is axe-core from web/node_modules (npm ci in web/, pinned by
// web/package-lock.json; hack/install-browser.sh runs it).
func axeSource(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "web", "node_modules", "axe-core", "axe.min.js"))
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("axe-core missing (run hack/install-browser.sh): %v", err)
		}
		t.Logf("axe-core missing, accessibility checks skipped (run hack/install-browser.sh): %v", err)
		return ""
	}
	return string(b)
}

// server is a node with its API (and dashboard) over plain HTTP on loopback.
type server struct {
	*nodetest.Node
	URL string // http://127.0.0.1:port, plus the path prefix if any
}

func startServer(t *testing.T, opts ...nodetest.Option) *server {
	t.Helper()
	opts = append([]nodetest.Option{nodetest.Lameduck(100 * time.Millisecond), nodetest.APITLSOff()}, opts...)
	n := nodetest.Start(t, opts...)
	if n.Addrs.API == "" {
		t.Fatal("node reports no API address")
	}
	return &server{Node: n, URL: "http://" + n.Addrs.API}
}

// browser is one headless Chromium with one tab; its console errors,
// uncaught exceptions and requests to other origins fail the test.
type browser struct {
	t      testing.TB
	ctx    context.Context
	origin string
	axe    string

	mu       sync.Mutex
	problems []string
}

func newBrowser(t testing.TB, origin string, width, height int) *browser {
	t.Helper()
	exe := proc.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // tests run as root on CI and dev machines
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(width, height),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx, origin: origin, axe: axeSource(t)}
	// Ending the contexts stops the browser process and waits for it.
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc()
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, p := range b.problems {
			t.Errorf("browser: %s", p)
		}
	})
	// The first action starts the browser; no time limit on it, as a limit
	// would stop the whole browser when it expires.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", exe, err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.problem("console.error: " + strings.Join(parts, " "))
			}
		case *runtime.EventExceptionThrown:
			msg := e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
			b.problem("uncaught exception: " + msg)
		case *log.EventEntryAdded:
			// Network entries are the HTTP errors the app expects and
			// handles (401 before login); CSP violations and script
			// errors come from the other sources.
			if e.Entry.Level == log.EntryLevelError && e.Entry.Source != log.EntrySourceNetwork {
				b.problem(fmt.Sprintf("log %s: %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL))
			}
		case *network.EventRequestWillBeSent:
			u, err := url.Parse(e.Request.URL)
			if err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Scheme+"://"+u.Host != b.origin {
				b.problem("request to another origin: " + e.Request.URL)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	// Chromium keeps a desktop window at least about 500 px wide: a phone
	// width is emulated.
	if width < 600 {
		b.do("phone viewport", chromedp.EmulateViewport(int64(width), int64(height)))
	}
	b.do("enable events", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, log.Enable, cdp.Empty{})
		return err
	}))
	return b
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// do runs actions with a time limit.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v\npage: %s", what, err, b.pageText())
	}
}

// evalAs evaluates a JavaScript expression in the page.
func evalAs[T any](b *browser, js string, opts ...chromedp.EvaluateOption) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, opts...))
	if err != nil {
		b.t.Fatalf("evaluate %.200s: %v\npage: %s", js, err, b.pageText())
	}
	return v
}

func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	if len(s) > 1500 {
		s = s[:1500] + "…"
	}
	return loc + "\n" + s
}

// open loads a URL in the tab.
func (b *browser) open(u string) {
	b.t.Helper()
	b.do("open "+u, chromedp.Navigate(u))
}

func (b *browser) reload() {
	b.t.Helper()
	b.do("reload", chromedp.Reload())
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible))
}

// typeInto types text into the input sel after emptying it.
func (b *browser) typeInto(sel, text string) {
	b.t.Helper()
	evalAs[chromedp.Void](b, fmt.Sprintf(`(e => { e.value = ""; e.dispatchEvent(new Event("input", {bubbles: true})); })(document.querySelector(%q))`, sel))
	b.do("type into "+sel, chromedp.SendKeys(chromedp.CSS(sel), text, chromedp.NodeVisible))
}

// waitText waits until an element matching sel contains text.
func (b *browser) waitText(sel, text string) {
	b.t.Helper()
	js := fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.innerText.includes(%q))`, sel, text)
	b.waitJS(fmt.Sprintf("%s containing %q", sel, text), js)
}

// waitJS polls a boolean expression for up to 15s.
func (b *browser) waitJS(what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("waiting for %s: not within 15s (last error %v)\npage: %s", what, err, b.pageText())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reloadUntil reloads the page until js is true, for data the server
// writes in the background (query-log batches, rollups). Each round waits
// for the page to show its data (the "svc:ready" mark) before judging it:
// a check made the moment the heading appears sees an empty table while the
// fetch is still on its way, and under load it never sees anything else.
func (b *browser) reloadUntil(d time.Duration, what, js string) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if evalAs[bool](b, js) {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("%s: not true within %s\npage: %s", what, d, b.pageText())
		}
		time.Sleep(200 * time.Millisecond)
		b.reload()
		b.waitJS("the page's data after a reload", `performance.getEntriesByName('svc:ready').length > 0 && ![...document.querySelectorAll('main p.muted')].some(p => p.innerText.startsWith('Loading'))`)
	}
}

func (b *browser) location() string {
	b.t.Helper()
	return evalAs[string](b, `location.href`)
}

// login fills the sign-in form (the page must show it) and submits it.
func (b *browser) login(user, password string) {
	b.t.Helper()
	b.waitJS("the sign-in form", `!!document.querySelector('#username')`)
	b.typeInto("#username", user)
	b.typeInto("#password", password)
	b.click("form button[type=submit]")
}

// axeViolation is one failed rule of axe-core.
type axeViolation struct {
	ID     string   `json:"id"`
	Impact string   `json:"impact"`
	Help   string   `json:"help"`
	Nodes  []string `json:"nodes"`
}

// checkA11y runs axe-core on the page as it is and fails on serious or
// critical violations. The script goes in through the DevTools protocol,
// which the page's CSP does not govern.
func (b *browser) checkA11y(page string) {
	b.t.Helper()
	if b.axe == "" {
		return
	}
	if !evalAs[bool](b, `typeof axe !== "undefined"`) {
		evalAs[chromedp.Void](b, b.axe)
	}
	res := evalAs[string](b, `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === "serious" || v.impact === "critical").map(v => ({id: v.id, impact: v.impact, help: v.help,
			nodes: v.nodes.slice(0, 5).map(n => n.html)}))))`, chromedp.EvalAwaitPromise)
	var vs []axeViolation
	if err := json.Unmarshal([]byte(res), &vs); err != nil {
		b.t.Fatalf("axe result of %s: %v: %s", page, err, res)
	}
	for _, v := range vs {
		b.t.Errorf("axe on %s: %s (%s): %s; e.g. %s", page, v.ID, v.Impact, v.Help, strings.Join(v.Nodes, " | "))
	}
}

// clearCookies drops the session cookie, as an expired session would.
func (b *browser) clearCookies() {
	b.t.Helper()
	b.do("clear cookies", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, network.ClearBrowserCookies, cdp.Empty{})
		return err
	}))
}

// screenshot saves a full-page PNG when SCREENSHOTS names a directory
// (make screenshots).
func (b *browser) screenshot(name string) {
	b.t.Helper()
	dir := os.Getenv("SCREENSHOTS")
	if dir == "" {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

var generatedRE = regexp.MustCompile(`Generated password for user "admin": (\S+)`)

// syncBuffer collects a node's output for the test to search.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startFirstRun runs a node with no administrator password in its
// environment (a first start generates one and prints it) and returns its
// API URL and that password. The node is stopped when the test ends.
func startFirstRun(t *testing.T) (apiURL, password string) {
	t.Helper()
	dir := t.TempDir()
	cfg := nodetest.WriteConfig(t, dir, nodetest.Lameduck(100*time.Millisecond), nodetest.APITLSOff())
	out := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan node.Addrs, 1)
	exited := make(chan error, 1)
	go func() {
		exited <- node.Run(ctx, node.Options{ConfigPath: cfg, ConfigExplicit: true, Stderr: out,
			Ready: func(a node.Addrs) { ready <- a }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			t.Error("first-run node did not stop within 15s")
		}
	})
	var addrs node.Addrs
	select {
	case addrs = <-ready:
	case err := <-exited:
		t.Fatalf("first-run node stopped: %v\n%s", err, out.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("first-run node not ready within 60s\n%s", out.String())
	}
	nodetest.Eventually(t, 10*time.Second, "generated admin password in the output", func() bool {
		m := generatedRE.FindStringSubmatch(out.String())
		if m != nil {
			password = m[1]
		}
		return m != nil
	})
	return "http://" + addrs.API, password
}

// get fetches a URL without a browser (headers and bodies of the server).
func get(t *testing.T, u string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, sb.String()
}

// runDig runs `dig @host -p port name A` with a bounded wait.
func runDig(addr, name string) (string, error) {
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		return "", fmt.Errorf("address %q", addr)
	}
	p, err := exec.LookPath("dig")
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, p, "@"+host, "-p", port, "+tries=1", "+time=3", name, "A").CombinedOutput()
	return string(out), err
}
