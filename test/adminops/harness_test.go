// Package adminops_test runs the built svc binary, both as the server
// (`svc serve`) and as the admin's CLI, with a real DNS client (dig), through
// the everyday stories of issue 18: a write answered by the next query,
// a backup that restores, and a start-up log without false warnings.
package adminops_test

import (
	"context"
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

// svcBin is the binary built once for the package.
var svcBin string

func TestMain(m *testing.M) {
	os.Exit(proc.MainWithSvc(m, &svcBin))
}

// homeLan is the README's zone as hack/dev/objects.d ships it (applied by
// the file manager, as `make run` does).
const homeLan = `apiVersion: service.io/v1alpha1
kind: DNSZone
metadata:
  name: home.lan
spec:
  defaultTTL: 300
  nameServers: [ns1.home.lan.]
---
apiVersion: service.io/v1alpha1
kind: DNSRecordSet
metadata:
  name: home-lan-hosts
  namespace: default
spec:
  zoneRef: {name: home.lan}
  endpoints:
    - {dnsName: ns1.home.lan, recordType: A, targets: [192.0.2.53]}
    - {dnsName: nas.home.lan, recordType: A, targets: [192.0.2.10]}
`

// server is one `svc serve` process of the built binary.
type server struct {
	*proc.Server
	Dir   string
	URL   string // API, plain HTTP
	DNS   string // UDP host:port
	Token string // bootstrap token (admin)

	cfg, tokenFile string
}

type serverOpt struct {
	objects map[string]string // objectsDir files
	extra   string            // YAML appended to service.yaml
}

// startServer runs `svc serve` in a new directory with loopback port-0
// listeners and a bootstrap token, and waits until its listeners are up.
// The process gets SIGTERM (and is waited for) when the test ends.
func startServer(t *testing.T, o serverOpt) *server {
	t.Helper()
	dir := t.TempDir()
	s := &server{Dir: dir}
	opts := []nodetest.Option{nodetest.APITLSOff(), nodetest.Lameduck(50 * time.Millisecond), nodetest.SettingsFile()}
	if o.objects != nil {
		opts = append(opts, nodetest.Objects(o.objects))
	}
	if o.extra != "" {
		opts = append(opts, nodetest.ExtraYAML(o.extra))
	}
	cfg := nodetest.WriteConfig(t, dir, opts...)
	tokenFile := filepath.Join(dir, "bootstrap.token")
	run(t, nil, "", "token", "generate", "--out", tokenFile)
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	s.Token = strings.TrimSpace(string(tok))

	s.cfg, s.tokenFile = cfg, tokenFile
	s.launch(t)
	return s
}

// restart stops the server and starts it again on the same directory
// (store, data, objects dir); the returned server has the new log.
func (s *server) restart(t *testing.T) *server {
	t.Helper()
	s.Stop()
	n := &server{Dir: s.Dir, Token: s.Token, cfg: s.cfg, tokenFile: s.tokenFile}
	n.launch(t)
	return n
}

// launch runs `svc serve` and waits until its listeners are up (the
// internal listener opens last).
func (s *server) launch(t *testing.T) {
	t.Helper()
	s.Server = proc.Serve(t, proc.ServeConfig{Bin: svcBin, Config: s.cfg, Dir: s.Dir, Ready: proc.AllListeners,
		Env: []string{"HOME=" + s.Dir, "PATH=" + os.Getenv("PATH"), "SERVICE_BOOTSTRAP_TOKEN_FILE=" + s.tokenFile,
			"SERVICE_ADMIN_PASSWORD=first password of the test"}})
	s.URL, s.DNS = "http://"+s.Server.API(), s.Server.DNS()
}

// env is what the admin's shell has for this server.
func (s *server) env(home string) []string {
	return []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "SERVICE_KEYRING=file",
		"SERVICE_SERVER=" + s.URL, "SERVICE_TOKEN=" + s.Token}
}

type result = proc.Result

// run runs the built svc with env (nil: no server) and stdin.
func run(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	if env == nil {
		env = []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	}
	return proc.Run(t, env, stdin, svcBin, args...)
}

// admin is someone running svc against one server.
type admin struct {
	t    *testing.T
	s    *server
	home string
}

func newAdmin(t *testing.T, s *server) *admin { return &admin{t: t, s: s, home: t.TempDir()} }

func (a *admin) run(args ...string) result {
	a.t.Helper()
	return run(a.t, a.s.env(a.home), "", args...)
}

// ok runs svc and fails the test on a non-zero exit.
func (a *admin) ok(args ...string) string {
	a.t.Helper()
	r := a.run(args...)
	if r.Code != 0 {
		a.t.Fatalf("svc %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
	return r.Stdout
}

// dig asks the server's DNS listener with dig and returns the answer's
// data (+short) and dig's status line.
func dig(t *testing.T, addr, name, qtype string) (short, status string) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dig", "@"+host, "-p", port, "+tries=1", "+time=2", "+noall", "+answer", "+comments", name, qtype).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %s %s: %v\n%s", name, qtype, err, out)
	}
	var answers []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := digStatusRE.FindStringSubmatch(line); m != nil {
			status = m[1]
		}
		if f := strings.Fields(line); len(f) >= 5 && !strings.HasPrefix(line, ";") {
			answers = append(answers, strings.Join(f[4:], " "))
		}
	}
	return strings.Join(answers, "\n"), status
}

var digStatusRE = regexp.MustCompile(`status: ([A-Z]+)`)
