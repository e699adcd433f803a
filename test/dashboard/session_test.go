package dashboard_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

// svcBin is the svc binary built once for the package: the tests create
// users with its admin commands, as an administrator would.
var svcBin string

func TestMain(m *testing.M) {
	os.Exit(proc.MainWithSvc(m, &svcBin))
}

// viewerBindings binds the local user "viewer" to the read-only roles.
const viewerBindings = `
rbac:
  bindings:
    - subject: {kind: User, name: viewer}
      role: viewer
    - subject: {kind: User, name: viewer}
      role: auditor
`

// addUser creates a local user as an administrator on the node's host
// does: `svc admin reset-password NAME --create --password-stdin` over the
// admin socket (auth.adminSocket.path, which nodetest sets), with a
// temporary password the user must change; then the user signs in and
// chooses password through POST /auth/password, as the dashboard's
// "Choose a new password" page does.
func addUser(t *testing.T, s *server, name, password string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	temporary := "temporary " + password
	cmd := exec.CommandContext(ctx, svcBin, "admin", "reset-password", name, "--create", "--password-stdin",
		"--socket", filepath.Join(s.Dir, "data", "service.sock"))
	cmd.Stdin = strings.NewReader(temporary + "\n")
	cmd.Env = append(os.Environ(), "SERVICE_ADMIN_SOCKET=", "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "password of "+name+" created") {
		t.Fatalf("svc admin reset-password %s --create: %v\n%s", name, err, out)
	}
	u := signIn(t, s, name, temporary)
	u.do(http.MethodPost, "/auth/password", map[string]string{"currentPassword": temporary, "newPassword": password}, nil)
}

// TestViewerSeesNoWriteControls: what /auth/me does not permit is not
// shown: a viewer (with auditor, to read the log) gets the log and the
// overview and explain (dns.query is a viewer's), but no block or allow.
func TestViewerSeesNoWriteControls(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword), nodetest.ExtraYAML(viewerBindings))
	addUser(t, s, "viewer", "viewer password 1")
	dig(t, s, "seen-by-viewer.example")

	b := newBrowser(t, s.URL, 1280, 900)
	b.open(s.URL + "/queries")
	b.waitText("h1", "Sign in")
	b.login("viewer", "viewer password 1")
	b.waitText("h1", "Query log")
	b.waitJS("the viewer's row", `!!document.querySelector('tr[data-domain="seen-by-viewer.example"]')`)
	buttons := evalAs[string](b, `[...document.querySelectorAll('tbody button')].map(e => e.innerText).join(',')`)
	if strings.Contains(buttons, "Block") || strings.Contains(buttons, "Allow") {
		t.Errorf("a viewer sees write buttons: %s", buttons)
	}
	if !strings.Contains(buttons, "Explain") {
		t.Errorf("a viewer (dns.query) lacks explain: %q", buttons)
	}
	nav := evalAs[string](b, `document.querySelector('nav.main').innerText`)
	for _, want := range []string{"Overview", "Query log"} {
		if !strings.Contains(nav, want) {
			t.Errorf("viewer navigation lacks %s: %q", want, nav)
		}
	}
	b.checkA11y("query log as viewer")

	// The administrator on the same row has them.
	a := newBrowser(t, s.URL, 1280, 900)
	a.open(s.URL + "/queries")
	a.waitText("h1", "Sign in")
	a.login("admin", adminPassword)
	a.waitJS("the admin's row with its actions", `!!document.querySelector('tr[data-domain="seen-by-viewer.example"] button[aria-label="Block seen-by-viewer.example"]') &&
		!!document.querySelector('tr[data-domain="seen-by-viewer.example"] button[aria-label="Explain seen-by-viewer.example"]')`)
}

// TestExpiredSessionReturnsToLoginAndBack: when the idle timeout passes,
// the page notices by itself, shows the login with the reason, and after
// signing in again is back on the same filtered page.
func TestExpiredSessionReturnsToLoginAndBack(t *testing.T) {
	s := startServer(t, nodetest.Env("SERVICE_ADMIN_PASSWORD="+adminPassword, "SERVICE_AUTH__SESSION__IDLETIMEOUT=3s"))
	b := newBrowser(t, s.URL, 1280, 900)
	const page = "/queries?domain=expiry.example&status_class=allowed"
	b.open(s.URL + page)
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	if loc := b.location(); loc != s.URL+page {
		t.Fatalf("after login: %s", loc)
	}

	// Nothing is clicked: the idle timer asks /auth/me, gets 401 and shows
	// the login with the reason.
	b.waitText(".msg", "Your session has ended")
	if loc := b.location(); !strings.Contains(loc, "/login?") || !strings.Contains(loc, "next=") {
		t.Errorf("expired session at %s", loc)
	}
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	if loc := b.location(); loc != s.URL+page {
		t.Errorf("back after the new login: %s, want %s", loc, s.URL+page)
	}

	// A session dropped some other way (here: the cookie removed) is caught
	// by the next request the page makes, and returns the same way.
	b.clearCookies()
	dig(t, s, "expiry.example")
	b.reload()
	b.waitText("h1", "Sign in")
	b.login("admin", adminPassword)
	b.waitText("h1", "Query log")
	if loc := b.location(); loc != s.URL+page {
		t.Errorf("back after the cookie was dropped: %s", loc)
	}
}
