// Package blockpage_test runs a whole node with the block page on loopback
// and checks what a person sees: dig for a blocked name answers the block
// page address; Debian's Chromium (headless, chromedp) sent to that name by
// a host-resolver rule shows why it was blocked and files the unblock form;
// the filed request is pending in the API with the decision that blocked;
// curl trusts the downloaded CA for the per-name HTTPS leaf; the 121st
// request in a minute is 429; forms without a valid token are refused; an
// approval through the API ends the block for the browser's address.
package blockpage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/svcdns/svc/internal/blockpage"
	"github.com/svcdns/svc/internal/node"
	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

const (
	blocked = "ads.example"
	// adminToken is the bootstrap token the test reads the API with.
	adminToken = "svc_abcdefghij12_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
)

// objects: a list blocking ads.example for the "office" group, whose
// policy answers blocked names with the block page. They are written
// through the API (manager api), so an approval may attach its allow list
// to the policy; objects.d files would be owned by their file.
var objects = []string{
	`{"apiVersion":"service.io/v1alpha1","kind":"BlockList","metadata":{"name":"ads","namespace":"default"},"spec":{"sources":[{"name":"main","inline":["||ads.example^"]}]}}`,
	`{"apiVersion":"service.io/v1alpha1","kind":"ClientGroup","metadata":{"name":"office","namespace":"default"},"spec":{"addresses":["127.0.0.0/8"]}}`,
	`{"apiVersion":"service.io/v1alpha1","kind":"Policy","metadata":{"name":"office","namespace":"default"},"spec":{"clientGroupRefs":["office"],"blockListRefs":["ads"],"globalLists":false,"blockMode":"blockPage"}}`,
}

type blockPageNode struct {
	*nodetest.Node
	http, https string // listener addresses
}

func startNode(t *testing.T, env ...string) *blockPageNode {
	t.Helper()
	env = append([]string{
		"SERVICE_BLOCKPAGE__ENABLED=true",
		"SERVICE_LISTENERS__BLOCKPAGE__HTTP=127.0.0.1:0",
		"SERVICE_LISTENERS__BLOCKPAGE__HTTPS=127.0.0.1:0",
		"SERVICE_BLOCKPAGE__TITLE=Blocked on the office network",
		"SERVICE_BOOTSTRAP_TOKEN=" + adminToken,
	}, env...)
	n := nodetest.Start(t, nodetest.APITLSOff(), nodetest.Lameduck(50*time.Millisecond), nodetest.Env(env...))
	if n.Addrs.BlockPageHTTP == "" || n.Addrs.BlockPageHTTPS == "" {
		t.Fatalf("node reports no block page listeners: %+v", n.Addrs)
	}
	bn := &blockPageNode{Node: n, http: n.Addrs.BlockPageHTTP, https: n.Addrs.BlockPageHTTPS}
	for _, o := range objects {
		var out any
		apiDo(t, bn, http.MethodPost, "/apply", o, &out)
	}
	return bn
}

// dig runs the real client against the node and returns its +short output.
func dig(t *testing.T, server, name, qtype string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(server)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dig", "@"+host, "-p", port, "+short", "+tries=1", "+time=2", name, qtype).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %s %s: %v\n%s", name, qtype, err, out)
	}
	return strings.TrimSpace(string(out))
}

// waitDig polls dig until it answers want: lists compile after the start.
func waitDig(t *testing.T, server, name, qtype, want string) {
	t.Helper()
	var got string
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if got = dig(t, server, name, qtype); got == want {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("dig %s %s: %q, want %q", name, qtype, got, want)
}

// clientFrom is an HTTP client whose connections come from the loopback
// address from (each test client its own rate-limit bucket) and go to addr
// whatever the URL's host, as a browser resolving the name to it would.
func clientFrom(from, addr string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
	}, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func fetch(t *testing.T, c *http.Client, method, u string, body url.Values) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		r = strings.NewReader(body.Encode())
	}
	req, err := http.NewRequest(method, u, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func TestBlockPage(t *testing.T) {
	n := startNode(t)
	dnsAddr := n.DNSAddr("udp")
	// dig, a real client, is sent to the block page's address (the
	// listener's own IP, as blockPage.ipv4 is empty); no IPv6 listener,
	// so AAAA has no answer.
	waitDig(t, dnsAddr, blocked, "A", "127.0.0.1")
	if got := dig(t, dnsAddr, blocked, "AAAA"); got != "" {
		t.Errorf("dig AAAA %s: %q, want no answer", blocked, got)
	}

	t.Run("browser", func(t *testing.T) { browserStory(t, n) })

	var filed string // namespace/name of the request the browser filed

	t.Run("the filed request", func(t *testing.T) {
		// what the browser filed is a pending UnblockRequest carrying the
		// domain, the browser's address and the decision
		var page struct {
			Items []struct {
				Namespace, Name                           string
				Domain, Reason, Policy, List, Rule, Phase string
				Requester                                 struct{ IP, Contact string }
			}
		}
		apiGet(t, n, "/unblockrequests?phase=pending&domain="+blocked, &page)
		var found string
		for _, it := range page.Items {
			if it.Requester.IP != "127.0.0.1" {
				continue
			}
			found = it.Namespace + "/" + it.Name
			if it.Phase != "pending" || it.Policy != "default/office" || it.List != "default/ads" || it.Rule != "||ads.example^" ||
				it.Reason != "I need this for the quarterly report" || it.Requester.Contact != "kim@example.org" {
				t.Errorf("filed request: %+v", it)
			}
		}
		if found == "" {
			t.Fatalf("no pending request from 127.0.0.1 for %s: %+v", blocked, page.Items)
		}
		filed = found
	})

	t.Run("https", func(t *testing.T) {
		dir := t.TempDir()
		ca := filepath.Join(dir, "ca.crt")
		resp, body := fetch(t, clientFrom("127.0.0.4", n.http), http.MethodGet, "http://"+blocked+blockpage.CAPath, nil)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "-----BEGIN CERTIFICATE-----") {
			t.Fatalf("CA download: %d %.100s", resp.StatusCode, body)
		}
		if err := os.WriteFile(ca, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		// the API serves the same CA, without a login
		resp, err := http.Get("http://" + n.Addrs.API + "/api/v1/blockpage/ca.crt")
		if err != nil {
			t.Fatal(err)
		}
		fromAPI, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(fromAPI) != body {
			t.Fatalf("GET /api/v1/blockpage/ca.crt: %d, same as the page's: %v", resp.StatusCode, string(fromAPI) == body)
		}
		_, port, _ := net.SplitHostPort(n.https)
		target := fmt.Sprintf("https://%s:%s/", blocked, port)
		resolve := fmt.Sprintf("%s:%s:127.0.0.1", blocked, port)
		curl := func(args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, "curl", append([]string{"-sS", "--interface", "127.0.0.4", "--resolve", resolve}, args...)...).CombinedOutput()
			return string(out), err
		}
		out, err := curl("--cacert", ca, "-o", "/dev/null", "-w", "%{http_code}", target)
		if err != nil || out != "403" {
			t.Fatalf("curl --cacert <downloaded CA> %s: %v %q", target, err, out)
		}
		out, err = curl("--cacert", ca, target)
		if err != nil || !strings.Contains(out, "||ads.example^") {
			t.Fatalf("curl over HTTPS: page lacks the rule: %v\n%s", err, out)
		}
		out, err = curl("-o", "/dev/null", target)
		if err == nil || !strings.Contains(out, "certificate") {
			t.Fatalf("curl without the CA: %v %q, want a certificate failure", err, out)
		}
	})

	t.Run("rate limit", func(t *testing.T) {
		c := clientFrom("127.0.0.5", n.http)
		start := time.Now()
		for i := 1; i <= 120; i++ {
			if resp, _ := fetch(t, c, http.MethodHead, "http://"+blocked+"/", nil); resp.StatusCode != http.StatusForbidden {
				t.Fatalf("request %d: %d", i, resp.StatusCode)
			}
		}
		resp, body := fetch(t, c, http.MethodGet, "http://"+blocked+"/", nil)
		secs, err := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 60 {
			t.Fatalf("121st request: %d Retry-After %q: %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		t.Logf("120 requests in %s; the 121st: 429, Retry-After %ds", time.Since(start).Round(time.Millisecond), secs)
		if resp, _ := fetch(t, clientFrom("127.0.0.6", n.http), http.MethodGet, "http://"+blocked+"/", nil); resp.StatusCode != http.StatusForbidden {
			t.Fatalf("another client: %d", resp.StatusCode)
		}
	})

	t.Run("hostile host and direct visits", func(t *testing.T) {
		c := clientFrom("127.0.0.7", n.http)
		for host, want := range map[string]string{
			"127.0.0.1":    "You opened the block page by its address",
			"free.example": "is not blocked from free.example",
		} {
			_, body := fetch(t, c, http.MethodGet, "http://"+host+"/", nil)
			if !strings.Contains(body, want) {
				t.Errorf("Host %s: page lacks %q", host, want)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, "http://x/", nil)
		req.Host = "<script>alert(1)</script>.example"
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "<script>") || !strings.Contains(string(b), "did not say which site") {
			t.Errorf("hostile Host reflected or not refused:\n%s", b)
		}
	})

	t.Run("form tokens", func(t *testing.T) {
		c := clientFrom("127.0.0.8", n.http)
		_, page := fetch(t, c, http.MethodGet, "http://"+blocked+"/", nil)
		m := tokenRE.FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("the page offers no unblock form:\n%s", page)
		}
		tok := m[1]
		tampered := []byte(tok)
		tampered[5] ^= 1
		for name, tk := range map[string]string{"no token": "", "tampered": string(tampered), "garbage": "x.y"} {
			resp, body := fetch(t, c, http.MethodPost, "http://"+blocked+blockpage.UnblockPath, url.Values{"token": {tk}, "reason": {"work"}})
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "not valid") {
				t.Errorf("%s: %d\n%s", name, resp.StatusCode, body)
			}
		}
		// another address with this page's token
		resp, _ := fetch(t, clientFrom("127.0.0.9", n.http), http.MethodPost, "http://"+blocked+blockpage.UnblockPath, url.Values{"token": {tok}, "reason": {"work"}})
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("token from another address: %d", resp.StatusCode)
		}
		resp, body := fetch(t, c, http.MethodPost, "http://"+blocked+blockpage.UnblockPath, url.Values{"token": {tok}, "reason": {"needed for work"}})
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("valid form: %d\n%s", resp.StatusCode, body)
		}
		resp, body = fetch(t, c, http.MethodPost, "http://"+blocked+blockpage.UnblockPath, url.Values{"token": {tok}, "reason": {"needed for work"}})
		if resp.StatusCode != http.StatusConflict || !strings.Contains(body, "already sent") {
			t.Errorf("replayed token: %d\n%s", resp.StatusCode, body)
		}
	})

	// last: an administrator approves the browser's request for the
	// office group; dig no longer answers the block page address and the
	// page says the address is not blocked any more.
	t.Run("approved", func(t *testing.T) {
		if filed == "" {
			t.Skip("no request was filed")
		}
		var out map[string]any
		apiDo(t, n, http.MethodPost, "/unblockrequests/"+filed+"/approve", `{"scope":"groups","groups":["office"],"comment":"ok"}`, &out)
		if out["phase"] != "approved" {
			t.Fatalf("approve: %v", out)
		}
		deadline := time.Now().Add(15 * time.Second)
		for dig(t, dnsAddr, blocked, "A") == "127.0.0.1" {
			if time.Now().After(deadline) {
				t.Fatal("dig still answers the block page address after the approval")
			}
			time.Sleep(100 * time.Millisecond)
		}
		_, page := fetch(t, clientFrom("127.0.0.1", n.http), http.MethodGet, "http://"+blocked+"/", nil)
		if !strings.Contains(page, "Your address 127.0.0.1 is not blocked from ads.example") || strings.Contains(page, `name="token"`) {
			t.Errorf("page after the approval:\n%s", page)
		}
	})
}

// apiGet reads an API route with the bootstrap token into out.
func apiGet(t *testing.T, n *blockPageNode, path string, out any) {
	t.Helper()
	apiDo(t, n, http.MethodGet, path, "", out)
}

// apiDo calls an API route with the bootstrap token; an answer other than
// 200 fails the test.
func apiDo(t *testing.T, n *blockPageNode, method, path, body string, out any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+n.Addrs.API+"/api/v1"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s %s: %v: %s", method, path, err, b)
	}
}

var tokenRE = regexp.MustCompile(`name="token" value="([^"]+)"`)

// browserStory: Chromium, sent to the block page for ads.example by a
// host-resolver rule (what the DNS answer does for a real browser), with
// JavaScript off, sees the title, the policy, the list and the rule, and
// files an unblock request with the form.
func browserStory(t *testing.T, n *blockPageNode) {
	exe := proc.Chromium(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("host-resolver-rules", "MAP "+blocked+" "+n.http),
		// no https:// attempt first for an http:// address
		chromedp.Flag("disable-features", "HttpsUpgrades,HttpsFirstBalancedModeAutoEnable"),
		chromedp.Flag("blink-settings", "scriptEnabled=false"),
		chromedp.UserDataDir(t.TempDir()),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting Chromium (%s): %v", exe, err)
	}
	var mu sync.Mutex
	var problems []string
	_ = chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			mu.Lock()
			problems = append(problems, e.ExceptionDetails.Text)
			mu.Unlock()
		}
	})
	run := func(what string, a ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		if err := chromedp.Do(c, a...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%q) || {innerText: ""}).innerText`, sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return s
	}
	start := time.Now()
	run("open http://"+blocked+"/", chromedp.Navigate("http://"+blocked+"/some/page"))
	t.Logf("page loaded in Chromium in %s", time.Since(start).Round(time.Millisecond))
	for sel, want := range map[string]string{
		"#title": "Blocked on the office network", "#detail-domain": blocked, "#detail-policy": "default/office",
		"#detail-list": "default/ads", "#detail-rule": "||ads.example^", "#detail-client": "127.0.0.1",
		"#message": "blocked by the administrator",
	} {
		if got := text(sel); !strings.Contains(got, want) {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	c, cancel := context.WithTimeout(ctx, 10*time.Second)
	title, err := chromedp.Run(c, chromedp.Title())
	cancel()
	if err != nil || title != "Blocked on the office network" {
		t.Errorf("document title %q (%v)", title, err)
	}
	if text("#unblock") == "" {
		t.Fatalf("the page offers no unblock form: %s", text("body"))
	}
	run("fill the form",
		chromedp.SendKeys(chromedp.CSS("#reason"), "I need this for the quarterly report", chromedp.NodeVisible),
		chromedp.SendKeys(chromedp.CSS("#requester"), "kim@example.org", chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS("#unblock button[type=submit]"), chromedp.NodeVisible),
	)
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(text("#notice"), "Your request was sent") {
		if time.Now().After(deadline) {
			t.Fatalf("no confirmation after sending the form; page: %s", text("body"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser: %s", p)
	}
}

// TestEnabledWithoutAddressRefused: blockPage.enabled with the default
// listener ":80" and no blockPage.ipv4/.ipv6 names no address to answer, so
// the node refuses to start and says what to set.
func TestEnabledWithoutAddressRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := nodetest.WriteConfig(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := node.Run(ctx, node.Options{ConfigPath: cfg, ConfigExplicit: true, Stderr: io.Discard,
		Environ: []string{"SERVICE_BLOCKPAGE__ENABLED=true", "SERVICE_LISTENERS__BLOCKPAGE__HTTP=:80"}})
	if err == nil || !strings.Contains(err.Error(), "blockPage.enabled: no block page address: set blockPage.ipv4 or blockPage.ipv6") {
		t.Fatalf("start with blockPage.enabled and no address: %v", err)
	}
}
