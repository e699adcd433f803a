package cli_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/nodetest"
	"github.com/svcdns/svc/test/proc"
)

// binaryServer is `svc serve` run as a process, as `make run` runs it, with
// the environment of the test (no SERVICE_ADMIN_PASSWORD: the first start
// generates the administrator's password and prints it once).
type binaryServer struct {
	URL      string // API, plain HTTP
	Password string // the generated administrator password
	Dir      string

	*proc.Server
}

// startBinaryServer runs the built svc serve with a loopback port-0 config
// and waits for the API address and the generated password on its output.
// The process gets SIGTERM and is waited for when the test ends.
func startBinaryServer(t *testing.T, env ...string) *binaryServer {
	t.Helper()
	dir := t.TempDir()
	cfg := nodetest.WriteConfig(t, dir, nodetest.APITLSOff(), nodetest.Lameduck(50*time.Millisecond))
	return startBinaryServerIn(t, dir, cfg, "http", env...)
}

// startBinaryServerIn runs svc serve --config cfg from the directory dir
// (relative paths of the config resolve there); scheme is the API's.
func startBinaryServerIn(t *testing.T, dir, cfg, scheme string, env ...string) *binaryServer {
	t.Helper()
	srv := proc.Serve(t, proc.ServeConfig{Bin: svcBin, Config: cfg, Dir: dir, Ready: proc.APIAndPassword,
		Env: append([]string{"HOME=" + dir, "PATH=" + os.Getenv("PATH")}, env...)})
	return &binaryServer{Server: srv, Dir: dir, URL: scheme + "://" + srv.API(), Password: srv.Password()}
}

// TestFirstLoginChangesGeneratedPassword is the first run of the README:
// the generated administrator password must be changed, and the CLI does
// it (before, `svc login` failed with password_change_required and only
// curl with the CSRF header could change it). Then `svc passwd` changes it
// again and the old one stops working.
func TestFirstLoginChangesGeneratedPassword(t *testing.T) {
	s := startBinaryServer(t)
	const newPw = "a much better passphrase 1"
	u := newUser(t)

	// Without a terminal and without --new-password-stdin: a refusal that
	// names the flag, and nothing saved.
	r := u.runIn(s.Password+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin")
	if r.Code == 0 || !strings.Contains(r.Stderr, "--new-password-stdin") || strings.Contains(r.Stderr, "password_change_required") {
		t.Fatalf("login without a new password: exit %d, want a refusal naming --new-password-stdin\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}

	out := u.okIn(s.Password+"\n"+newPw+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin", "--new-password-stdin")
	if !strings.Contains(out, "logged in to "+s.URL+" as admin") {
		t.Errorf("login output: %q", out)
	}
	// The CLI's token works for a verb that needs more than self-service.
	u.ok("get", "zones")

	// The generated password no longer logs in; the new one does, with no
	// change asked for.
	other := newUser(t)
	if r := other.runIn(s.Password+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin"); r.Code == 0 {
		t.Errorf("the generated password still logs in after the change:\n%s", r.Stdout)
	}
	other.okIn(newPw+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin")

	// svc passwd: current and new on two lines.
	const newer = "another good passphrase 2"
	out = u.okIn(newPw+"\n"+newer+"\n", "passwd", "--password-stdin")
	if !strings.Contains(out, "password of admin changed") {
		t.Errorf("passwd output: %q", out)
	}
	third := newUser(t)
	if r := third.runIn(newPw+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin"); r.Code == 0 {
		t.Errorf("the replaced password still logs in")
	}
	third.okIn(newer+"\n", "login", "--server", s.URL, "-u", "admin", "--password-stdin")

	// A wrong current password is refused and says so.
	r = u.runIn("not it\nwhatever it is 3\n", "passwd", "--password-stdin")
	if r.Code == 0 || !strings.Contains(r.Stderr, "currentPassword") {
		t.Errorf("passwd with a wrong current password: exit %d\nstderr: %s", r.Code, r.Stderr)
	}
}

// TestServeRefusesBadBootstrapToken: a recipe whose token command failed
// sets SERVICE_BOOTSTRAP_TOKEN to ""; the server must stop at start and say
// what a token looks like and how to make one, not start without a token.
func TestServeRefusesBadBootstrapToken(t *testing.T) {
	dir := t.TempDir()
	cfg := nodetest.WriteConfig(t, dir, nodetest.APITLSOff(), nodetest.Lameduck(50*time.Millisecond))
	empty := filepath.Join(dir, "empty.token")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, env, want string }{
		{"empty", "SERVICE_BOOTSTRAP_TOKEN=", "SERVICE_BOOTSTRAP_TOKEN is set but empty"},
		{"blank", "SERVICE_BOOTSTRAP_TOKEN=  ", "SERVICE_BOOTSTRAP_TOKEN is set but empty"},
		{"malformed", "SERVICE_BOOTSTRAP_TOKEN=hunter2", "SERVICE_BOOTSTRAP_TOKEN is not a token"},
		{"short", "SERVICE_BOOTSTRAP_TOKEN=svc_abc_def", "SERVICE_BOOTSTRAP_TOKEN is not a token"},
		{"empty file", "SERVICE_BOOTSTRAP_TOKEN_FILE=" + empty, "is empty"},
		{"file name empty", "SERVICE_BOOTSTRAP_TOKEN_FILE=", "SERVICE_BOOTSTRAP_TOKEN_FILE is set but empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, svcBin, "serve", "--config", cfg)
			cmd.Env = []string{"HOME=" + dir, "PATH=" + os.Getenv("PATH"), tc.env}
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("svc serve with %s kept running (started without the token):\n%s", tc.env, out)
			}
			if err == nil {
				t.Fatalf("svc serve with %s exited 0:\n%s", tc.env, out)
			}
			for _, want := range []string{tc.want, "svc token generate", "svc_<12 lowercase letters or digits>_<43 base64url characters>"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(string(out), "hunter2") {
				t.Errorf("the refused value is echoed:\n%s", out)
			}
		})
	}
}

// TestHelpShowsNoSecret: --help once printed SERVICE_TOKEN's value as the
// default of --token. No flag of any verb may show an environment value.
func TestHelpShowsNoSecret(t *testing.T) {
	const secret = "svc_leakleakleak_THIS-MUST-NOT-APPEAR-IN-HELP-OUTPUT-xxxxxxxxxx"
	u := newUser(t, "SERVICE_TOKEN="+secret, "SERVICE_SERVER=https://"+secret, "SERVICE_CONTEXT="+secret,
		"SERVICE_ADMIN_SOCKET=/"+secret, "SERVICE_CLI_CONFIG=/"+secret, "SERVICE_ADMIN_PASSWORD="+secret,
		"SERVICE_BOOTSTRAP_TOKEN="+secret)
	for _, args := range [][]string{{"--help"}, {"get", "--help"}, {"login", "--help"}, {"admin", "--help"},
		{"admin", "reset-password", "--help"}, {"logs", "--help"}, {"token", "create", "--help"}, {"passwd", "--help"}} {
		r := u.run(args...)
		if strings.Contains(r.Stdout+r.Stderr, "THIS-MUST-NOT-APPEAR") {
			t.Errorf("svc %s shows an environment secret:\n%s", strings.Join(args, " "), r.Stdout)
		}
	}
	if out := u.ok("--help"); !strings.Contains(out, "$SERVICE_TOKEN") {
		t.Errorf("--help does not name the variable --token defaults to:\n%s", out)
	}
}

// TestUnknownSubcommandsFail: `svc lists add` once printed help and exited
// 0; every unknown subcommand is an error with a did-you-mean.
func TestUnknownSubcommandsFail(t *testing.T) {
	u := newUser(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"lists", "alow", "x.example"}, `did you mean "allow"?`},
		{[]string{"stats", "sumary"}, `did you mean "summary"?`},
		{[]string{"token", "craete"}, `did you mean "create"?`},
		{[]string{"admin", "reset-pasword"}, `did you mean "reset-password"?`},
		{[]string{"config", "nonsense"}, `unknown command "nonsense" for "svc config"`},
	} {
		r := u.run(tc.args...)
		if r.Code == 0 {
			t.Errorf("svc %s: exit 0, want an error\nstdout: %s", strings.Join(tc.args, " "), r.Stdout)
			continue
		}
		if !strings.Contains(r.Stderr, tc.want) {
			t.Errorf("svc %s: stderr lacks %q:\n%s", strings.Join(tc.args, " "), tc.want, r.Stderr)
		}
	}
	// A bare group still shows its help.
	if out := u.ok("lists"); !strings.Contains(out, "Available Commands") {
		t.Errorf("svc lists: %q", out)
	}
}

// TestDashboardTokenReadsQueryLog: only auditor has querylogs.read. A viewer
// token is refused with a hint that names the role to bind, and
// `svc token create --role viewer,auditor` makes the read-only dashboard
// token in one step.
func TestDashboardTokenReadsQueryLog(t *testing.T) {
	s := startServer(t)
	admin := loggedIn(t, s)

	viewerTok := strings.TrimSpace(admin.ok("token", "create", "--role", "viewer", "--description", "viewer only"))
	viewer := newUser(t, "SERVICE_SERVER="+s.URL, "SERVICE_TOKEN="+viewerTok)
	r := viewer.run("logs")
	if r.Code == 0 {
		t.Fatalf("a viewer token reads the query log:\n%s", r.Stdout)
	}
	for _, want := range []string{"querylogs.read", "auditor", "svc token create --role viewer,auditor"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("403 of svc logs lacks %q:\n%s", want, r.Stderr)
		}
	}

	r = admin.run("token", "create", "--role", "viewer,auditor", "--description", "dashboard")
	if r.Code != 0 {
		t.Fatalf("token create --role viewer,auditor: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "roles viewer,auditor") {
		t.Errorf("token create does not say the token's roles: %q", r.Stderr)
	}
	dash := newUser(t, "SERVICE_SERVER="+s.URL, "SERVICE_TOKEN="+strings.TrimSpace(r.Stdout))
	dash.ok("logs")
	dash.ok("stats", "summary")
	dash.ok("get", "zones")
	// Read-only: a write is refused.
	if r := dash.run("lists", "deny", "ads.example"); r.Code == 0 {
		t.Errorf("the dashboard token writes:\n%s", r.Stdout)
	}
	// Listed with its roles.
	if out := admin.ok("token", "list"); !strings.Contains(out, "viewer,auditor") || !strings.Contains(out, "dashboard") {
		t.Errorf("token list:\n%s", out)
	}
	// An unknown role is refused by the CLI with a did-you-mean.
	if r := admin.run("token", "create", "--role", "auditer"); r.Code == 0 || !strings.Contains(r.Stderr, `did you mean "auditor"?`) {
		t.Errorf("token create --role auditer: exit %d\n%s", r.Code, r.Stderr)
	}
}

// TestLogsWideShowsPolicyAndRule: -o wide adds the policy and the rule that
// decided (it once printed the same columns as the table).
func TestLogsWideShowsPolicyAndRule(t *testing.T) {
	s := startServer(t)
	u := loggedIn(t, s)
	u.ok("lists", "deny", "wide.cli-test.example")
	var out string
	nodetest.Eventually(t, 20*time.Second, "the blocked query in svc logs -o wide", func() bool {
		s.query(t, "wide.cli-test.example")
		out = u.ok("logs", "-o", "wide", "--domain", "wide.cli-test.example")
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "wide.cli-test.example") && strings.Contains(l, "blocked") {
				return true
			}
		}
		return false
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	head := strings.Fields(lines[0])
	if len(head) < 2 || head[len(head)-2] != "POLICY" || head[len(head)-1] != "RULE" {
		t.Fatalf("-o wide header %q lacks POLICY and RULE", lines[0])
	}
	var row []string
	for _, l := range lines[1:] {
		if strings.Contains(l, "blocked") {
			row = strings.Fields(l)
		}
	}
	if len(row) != len(head) {
		t.Fatalf("row %q has %d columns, header %d", row, len(row), len(head))
	}
	if rule := row[len(row)-1]; !strings.Contains(rule, "wide.cli-test.example") {
		t.Errorf("RULE column %q does not show the rule that blocked", rule)
	}
	if plain := u.ok("logs", "--domain", "wide.cli-test.example"); strings.Contains(plain, "POLICY") {
		t.Errorf("the table without -o wide shows POLICY:\n%s", plain)
	}
}

// TestDocsPageIsSelfContained: /api/v1/docs loaded its viewer from
// unpkg.com (blank on a LAN without internet, a third-party request from an
// admin page). The page and its assets come from the binary and name no
// other origin, and the Content-Security-Policy allows none.
func TestDocsPageIsSelfContained(t *testing.T) {
	s := startServer(t)
	get := func(path string) (string, http.Header) {
		t.Helper()
		res, err := http.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", path, res.StatusCode, b)
		}
		return string(b), res.Header
	}
	page, hdr := get("/api/v1/docs")
	csp := hdr.Get("Content-Security-Policy")
	if strings.Contains(csp, "http") || !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "connect-src 'self'") {
		t.Errorf("docs CSP %q allows another origin or not the page's own script", csp)
	}
	external := regexp.MustCompile(`(?i)(https?:)?//[a-z0-9.-]+\.[a-z]{2,}|@import|integrity=`)
	assets := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(assets) < 2 {
		t.Fatalf("the page loads no script or style:\n%s", page)
	}
	check := func(name, body string) {
		if m := external.FindString(body); m != "" {
			t.Errorf("%s references another origin: %q", name, m)
		}
	}
	check("docs page", page)
	for _, a := range assets {
		body, h := get("/api/v1/" + a[1])
		if h.Get("Content-Type") == "" || len(body) < 100 {
			t.Errorf("asset %s: type %q, %d bytes", a[1], h.Get("Content-Type"), len(body))
		}
		check(a[1], body)
	}
	// What the page renders is there, on the same origin.
	doc, _ := get("/api/v1/openapi.json")
	if !strings.Contains(doc, `"paths"`) {
		t.Error("openapi.json has no paths")
	}
}
