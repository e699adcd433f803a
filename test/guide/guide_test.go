// Package guide_test follows docs/admin-guide.md step by step with the built
// binary: it installs svc with `make install DESTDIR=...`, starts the
// installed unit's ExecStart with the installed example config (moved to
// loopback and port 0), runs every marked sh block of the guide in order
// with real dig queries checking each effect, and ends by restoring the
// backup onto a second, fresh node. It also checks what ships with the
// guide: the install target, the systemd unit and the container image.
package guide_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/svcdns/svc/test/fakeupstream"
	"github.com/svcdns/svc/test/proc"
)

// svcBin is the binary built once for the package; `make install` is given
// it as BIN so the test never compiles in the Makefile.
var svcBin string

func TestMain(m *testing.M) {
	os.Exit(proc.MainWithSvc(m, &svcBin))
}

// pending names the steps that depend on work of issue 18 not landed yet:
// such a step still runs (later steps need its effect), is retried for a
// few seconds when its assertions fail, and is reported as skipped naming
// the missing piece instead of failing.
var pending = map[string]string{}

// byTestSteps are the steps the test performs itself instead of running
// their block (the guide marks them by-test).
var byTestSteps = map[string]func(t *testing.T, r *guideRun){
	"install":     func(t *testing.T, r *guideRun) { r.machines[""].install(t, r) },
	"start":       func(t *testing.T, r *guideRun) { r.machines[""].start(t, r) },
	"new-machine": newMachine,
	"upgrade":     upgrade,
}

const (
	newPassword = "the lan admin passphrase 1"
	kidsDevice  = "127.0.0.2" // the whole of 127/8 is loopback on Linux: dig -b works
)

// guideRun is one run through the guide: its steps, the test's stand-ins
// for the outside world (upstream resolver, list server) and the machines.
type guideRun struct {
	root     *testing.T // the whole run: nodes stop in its cleanup
	g        *guide
	repo     string
	shims    string
	upstream string // host:port of the resolver the guide's UPSTREAMS stand for
	sink     string // host:port that never answers: the default upstream of the test's nodes
	listURL  string
	machines map[string]*machine
}

func TestAdminGuide(t *testing.T) {
	for _, tool := range []string{"dig", "script", "make", "sed", "install"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found: hack/install-test-deps.sh installs the test tools (dig: bind9-dnsutils, script: bsdutils)", tool)
		}
	}
	g := readGuide(t)
	repo, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	r := &guideRun{root: t, g: g, repo: repo, shims: writeShims(t)}
	r.upstream = fakeupstream.A(t, "198.51.100.7")
	r.sink = startSink(t)
	adDomain := r.varValue(t, "AD_DOMAIN")
	r.listURL = startListServer(t, adDomain)
	r.machines = map[string]*machine{"": newMachineDir(t, "first"), "new": newMachineDir(t, "new")}

	for _, s := range g.steps {
		ok := t.Run(s.name, func(t *testing.T) {
			if s.byTest != "" {
				byTestSteps[s.name](t, r)
				if problems := r.machine(s).runChecks(t, r, s); len(problems) > 0 {
					t.Fatalf("step %s (docs/admin-guide.md line %d):\n%s", s.name, s.line, strings.Join(problems, "\n"))
				}
				return
			}
			r.machine(s).runStep(t, r, s)
		})
		if !ok {
			t.Fatalf("step %s (docs/admin-guide.md line %d) failed; later steps depend on it", s.name, s.line)
		}
	}
}

func (r *guideRun) machine(s step) *machine { return r.machines[s.machine] }

func (r *guideRun) stepNamed(t *testing.T, name string) step {
	t.Helper()
	for _, s := range r.g.steps {
		if s.name == name {
			return s
		}
	}
	t.Fatalf("the guide has no step %q", name)
	return step{}
}

// varValue is the value the guide's vars block gives NAME (the shell
// evaluates it, so quoting and comments behave as for a reader).
func (r *guideRun) varValue(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("sh", "-e", "-c", r.g.vars+"\nprintf %s \"$"+name+"\"").CombinedOutput()
	if err != nil {
		t.Fatalf("vars block: %v\n%s", err, out)
	}
	return string(out)
}

// machine is one host of the guide: its install (DESTDIR), state, the
// admin's home and the journal of its svc.
type machine struct {
	name     string
	dir      string
	destdir  string
	state    string
	home     string
	journal  string
	dnsPort  string
	apiPort  string
	password string
	config   string // the test's copy of the installed config; set by start
	stop     func() // stops its svc serve; set by start
}

func newMachineDir(t *testing.T, name string) *machine {
	dir := filepath.Join(t.TempDir(), name)
	m := &machine{name: name, dir: dir, state: filepath.Join(dir, "var-lib-service"),
		home: filepath.Join(dir, "home"), journal: filepath.Join(dir, "journal.log")}
	for _, d := range []string{m.state, m.home, filepath.Join(dir, "run")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// overrides are the test's values for the guide's variables on m.
func (r *guideRun) overrides(m *machine) map[string]string {
	return map[string]string{
		"SVC_HOST":    "127.0.0.1",
		"DNS_PORT":    m.dnsPort,
		"API_PORT":    m.apiPort,
		"STATE_DIR":   m.state,
		"CONFIG":      m.config,
		"UPSTREAMS":   `["` + r.upstream + `"]`,
		"LIST_URL":    r.listURL,
		"KIDS_DEVICE": kidsDevice,
	}
}

// env is the environment of the admin's shell on m: the installed svc and
// the shims first in PATH, the admin's home, the journal for the shim.
func (r *guideRun) env(m *machine) []string {
	return []string{
		"PATH=" + r.shims + ":" + filepath.Join(m.destdir, "usr", "local", "bin") + ":" + os.Getenv("PATH"),
		"HOME=" + m.home, "SERVICE_KEYRING=file", "LANG=C", "SVC_JOURNAL=" + m.journal,
		// Where RuntimeDirectory= puts the socket on a real install (start).
		"SERVICE_ADMIN_SOCKET=" + filepath.Join(m.dir, "run", "service.sock"),
	}
}

// shell runs script after the vars block on m, in a terminal typing tty
// when given, and returns its output with terminal line ends undone.
func (m *machine) shell(t *testing.T, r *guideRun, name, script string, tty []string) (string, error) {
	t.Helper()
	vars, err := r.g.varsWith(r.overrides(m))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(m.dir, name+".sh")
	if err := os.WriteFile(file, []byte(vars+"\n"+script), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	if len(tty) > 0 {
		// script(1) gives the block a pseudo-terminal: svc login prompts
		// without echo there, as for an admin at a console.
		cmd = exec.CommandContext(ctx, "script", "-qec", "sh -e "+file, "/dev/null")
		typed := strings.NewReplacer("$GENERATED_PASSWORD", m.password, "$NEW_PASSWORD", newPassword).
			Replace(strings.Join(tty, "\n")) + "\n"
		cmd.Stdin = strings.NewReader(typed)
	} else {
		cmd = exec.CommandContext(ctx, "sh", "-e", file)
	}
	cmd.Dir = m.home
	cmd.Env = r.env(m)
	out, err := cmd.CombinedOutput()
	return strings.ReplaceAll(string(out), "\r", ""), err
}

// runStep runs one guide block on m and asserts its markers. A pending step
// is retried for a bounded time (the block again while its own assertions
// fail, else only the checks) and skipped with the missing piece named.
func (m *machine) runStep(t *testing.T, r *guideRun, s step) {
	t.Helper()
	why, isPending := pending[s.name]
	deadline := time.Now().Add(4 * time.Second)
	blockDone := false
	for attempt := 1; ; attempt++ {
		var problems []string
		if !blockDone {
			problems = m.runBlock(t, r, s)
			blockDone = len(problems) == 0
		}
		if blockDone {
			problems = m.runChecks(t, r, s)
		}
		if len(problems) == 0 {
			if isPending {
				if attempt == 1 {
					t.Logf("step %s passes at once: %s has landed, take it out of pending", s.name, why)
					return
				}
				t.Skipf("pending %s: passed only on attempt %d", why, attempt)
			}
			return
		}
		if !isPending || time.Now().After(deadline) {
			msg := fmt.Sprintf("step %s (docs/admin-guide.md line %d):\n%s", s.name, s.line, strings.Join(problems, "\n"))
			if isPending {
				t.Skipf("pending %s; %s", why, msg)
			}
			t.Fatal(msg)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// runBlock runs the block of s once and returns what did not hold.
func (m *machine) runBlock(t *testing.T, r *guideRun, s step) []string {
	t.Helper()
	out, err := m.shell(t, r, s.name, s.script, s.tty)
	var problems []string
	if err != nil {
		problems = append(problems, fmt.Sprintf("the block failed: %v", err))
	}
	for _, re := range s.expect {
		if !re.MatchString(out) {
			problems = append(problems, fmt.Sprintf("expect %q: no match", re))
		}
	}
	for _, re := range s.reject {
		if re.MatchString(out) {
			problems = append(problems, fmt.Sprintf("reject %q: matched", re))
		}
	}
	if len(problems) > 0 {
		problems = append(problems, "--- block\n"+s.script+"--- output\n"+out)
	}
	return problems
}

// runChecks runs the test-only checks of s and returns what did not hold.
func (m *machine) runChecks(t *testing.T, r *guideRun, s step) []string {
	t.Helper()
	var problems []string
	for i, c := range s.checks {
		cout, err := m.shell(t, r, fmt.Sprintf("%s-check%d", s.name, i), c.cmd, nil)
		if err != nil {
			problems = append(problems, fmt.Sprintf("check %q failed: %v\n%s", c.cmd, err, cout))
			continue
		}
		if c.re.MatchString(cout) == c.negate {
			verb := "does not match"
			if c.negate {
				verb = "matches"
			}
			problems = append(problems, fmt.Sprintf("check %q: output %s %q:\n%s", c.cmd, verb, c.re, cout))
		}
	}
	return problems
}

// writeShims puts `sudo` (run as is: the test is the admin and the service
// user at once) and `journalctl` (the journal of the machine's svc) first
// in PATH.
func writeShims(t *testing.T) string {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"sudo":       "#!/bin/sh\nexec \"$@\"\n",
		"journalctl": "#!/bin/sh\n# journalctl -u svc: the output of the machine's svc serve.\ncat \"$SVC_JOURNAL\"\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// startSink holds a UDP socket that reads nothing: the default upstream of
// the test's nodes, so a name resolves only once the guide's upstreams
// step (or a restore of it) has pointed svc at the test's resolver.
func startSink(t *testing.T) string {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

// startListServer serves the block list LIST_URL stands for, in AdGuard's
// format like the guide's list, holding the guide's AD_DOMAIN.
func startListServer(t *testing.T, adDomain string) string {
	body := "! Title: test list for docs/admin-guide.md\n||" + adDomain + "^\n||ads.example.net^\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/filter.txt" {
			http.NotFound(w, req)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/filter.txt"
}

// install is the guide's `sudo make install`, staged with DESTDIR.
func (m *machine) install(t *testing.T, r *guideRun) {
	m.destdir = makeInstall(t, r.root, r.repo)
}

var (
	listenRE = regexp.MustCompile(`\b(?:0\.0\.0\.0|127\.0\.0\.1|\[::\]):\d+`)
)

// start is the guide's `systemctl enable --now svc`: the installed unit's
// ExecStart, in its WorkingDirectory, with the installed config. The test
// moves the config's listeners to 127.0.0.1:0 and its paths below the
// machine's directory, sets a short lameduck, points the default upstream
// at a socket that never answers, puts the admin socket where
// RuntimeDirectory= would, and allows its loopback list server. A restart
// (after stop) keeps the DNS and API ports, as port 53 and 8443 would stay.
func (m *machine) start(t *testing.T, r *guideRun) {
	unitPath := filepath.Join(m.destdir, "usr", "local", "lib", "systemd", "system", "svc.service")
	unit := readUnit(t, unitPath)
	argv := strings.Fields(unit["ExecStart"])
	if len(argv) < 2 || unit["WorkingDirectory"] == "" {
		t.Fatalf("%s: ExecStart %q, WorkingDirectory %q", unitPath, unit["ExecStart"], unit["WorkingDirectory"])
	}
	mapPath := func(p string) string {
		if strings.HasPrefix(p, "/var/lib/service") {
			return m.state + strings.TrimPrefix(p, "/var/lib/service")
		}
		return filepath.Join(m.destdir, p)
	}
	argv[0] = mapPath(argv[0])
	for i, a := range argv {
		if a == "--config" && i+1 < len(argv) {
			argv[i+1] = m.writeConfig(t, r, mapPath(argv[i+1]))
		}
	}
	restart := m.password != ""
	dir := mapPath(unit["WorkingDirectory"])
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + m.state,
		"SERVICE_AUTH__ADMINSOCKET__PATH=" + filepath.Join(m.dir, "run", "service.sock"),
		"SERVICE_BLOCKING__ALLOWLOCALLISTURLS=true"}
	if restart {
		env = append(env, "SERVICE_LISTENERS__API__ADDRESS=127.0.0.1:"+m.apiPort)
	}
	// The journal keeps earlier runs, as journalctl -u svc does.
	journal, err := os.OpenFile(m.journal, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the node's stop.
	r.root.Cleanup(func() { journal.Close() })
	// A first start prints the generated password; a restart does not.
	ready := func(s *proc.Server) bool { return proc.APIAndDNS(s) && proc.APIAndPassword(s) }
	if restart {
		ready = proc.APIAndDNS
	}
	// The node outlives this step: it is stopped when the whole test ends.
	srv := proc.Serve(t, proc.ServeConfig{Bin: argv[0], Args: argv[1:], Dir: dir, Env: env,
		Ready: ready, Journal: journal, Owner: r.root})
	m.stop = srv.Stop
	if !strings.HasPrefix(srv.DNS(), "127.0.0.1:") || !strings.HasPrefix(srv.API(), "127.0.0.1:") {
		t.Fatalf("DNS listener %q and API listener %q, want both on 127.0.0.1:\n%s", srv.DNS(), srv.API(), srv.Log())
	}
	_, dnsPort, _ := strings.Cut(srv.DNS(), ":")
	_, apiPort, _ := strings.Cut(srv.API(), ":")
	if srv.Password() != "" {
		m.password = srv.Password()
	}
	if restart && (dnsPort != m.dnsPort || apiPort != m.apiPort) {
		t.Fatalf("restarted on DNS port %s and API port %s, want %s and %s", dnsPort, apiPort, m.dnsPort, m.apiPort)
	}
	m.dnsPort, m.apiPort = dnsPort, apiPort
	_ = journal.Sync()
}

// writeConfig writes the test's copy of the installed config (see start)
// and returns its path.
func (m *machine) writeConfig(t *testing.T, r *guideRun, installed string) string {
	raw := readFile(t, installed)
	if !strings.Contains(raw, "address: 0.0.0.0:53\n") {
		t.Fatalf("%s: no DNS listener address: 0.0.0.0:53 (the guide's port 53 on every address)", installed)
	}
	cfg := listenRE.ReplaceAllString(raw, "127.0.0.1:0")
	if m.dnsPort != "" {
		// A restart: the DNS listener keeps its port.
		cfg = strings.Replace(cfg, "address: 127.0.0.1:0\n      protocols: [udp, tcp]", "address: 127.0.0.1:"+m.dnsPort+"\n      protocols: [udp, tcp]", 1)
		if !strings.Contains(cfg, "127.0.0.1:"+m.dnsPort) {
			t.Fatalf("%s: could not keep the DNS port on restart (the dns listener is no longer `address: ...` followed by `protocols: [udp, tcp]`)", installed)
		}
	}
	cfg = strings.ReplaceAll(cfg, "/var/lib/service", m.state)
	cfg = strings.ReplaceAll(cfg, "/etc/service", filepath.Join(m.destdir, "etc", "service"))
	if !strings.Contains(cfg, "\nnode:\n") {
		t.Fatalf("%s has no node: section", installed)
	}
	cfg = strings.Replace(cfg, "\nnode:\n", "\nnode:\n  lameduck: 50ms\n", 1)
	if regexp.MustCompile(`(?m)^upstreams:`).MatchString(cfg) {
		t.Fatalf("%s sets upstreams: the guide's upstreams step is where they are chosen", installed)
	}
	cfg += "\n# test/guide: a default upstream that never answers\nupstreams:\n  groups:\n    default:\n      servers: [" +
		r.sink + "]\n      timeout: 500ms\n"
	m.config = filepath.Join(m.dir, "service.yaml")
	if err := os.WriteFile(m.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return m.config
}

// newMachine is the guide's new machine: installed and started like the
// first, the backup copied over (the guide's scp), then the guide's own
// password and login steps run there.
func newMachine(t *testing.T, r *guideRun) {
	m := r.machines["new"]
	m.install(t, r)
	m.start(t, r)
	src := filepath.Join(r.machines[""].home, "svc-backup.yaml")
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("the backup step wrote no ~/svc-backup.yaml: %v", err)
	}
	if err := os.WriteFile(filepath.Join(m.home, "svc-backup.yaml"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"password", "login"} {
		m.runStep(t, r, r.stepNamed(t, name))
	}
}

// upgrade is the guide's upgrade on the first machine: make install over
// the old install, then a restart of the unit on the same state.
func upgrade(t *testing.T, r *guideRun) {
	m := r.machines[""]
	runMakeInstall(t, r.repo, m.destdir)
	m.stop()
	m.start(t, r)
}

// readUnit returns the [Service] keys of a unit file (the last value of a
// repeated key).
func readUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	section := ""
	for _, l := range strings.Split(readFile(t, path), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			section = l
			continue
		}
		if k, v, ok := strings.Cut(l, "="); ok && section == "[Service]" && !strings.HasPrefix(l, "#") {
			keys[k] = v
		}
	}
	return keys
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimPrefix(b, []byte("\ufeff")))
}
