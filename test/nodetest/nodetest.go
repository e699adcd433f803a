// Package nodetest runs a whole node (node.Run) in process for end-to-end
// tests: it writes a service.yaml with loopback port-0 listeners into a temp
// dir, starts the node, waits for it to be ready and stops it when the test
// ends. It is imported only by tests.
package nodetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/miekg/dns"

	"github.com/svcdns/svc/internal/node"
)

// baseConfig is the common service.yaml: every listener on 127.0.0.1:0, no
// block page, a dead upstream with a short timeout, and the admin socket in
// the data dir.
var baseConfig = template.Must(template.New("service.yaml").Parse(`
node:
{{- with .Name}}
  name: {{.}}
{{- end}}
  dataDir: {{.DataDir}}
  lameduck: {{.Lameduck}}
{{- with .Kube}}
store:
  driver: kube
  kube:
    startupTimeout: {{.StartupTimeout}}
    snapshot:
      maxAge: {{.SnapshotMaxAge}}
{{- end}}
listeners:
  dns:
    - address: 127.0.0.1:0
      protocols: [udp, tcp]
{{- with .ProxyFrom}}
  proxyProtocolFrom: [{{range $i, $p := .}}{{if $i}}, {{end}}{{$p}}{{end}}]
{{- end}}
{{- with .TLS}}
  dot:
    - {address: 127.0.0.1:0, tls: {certFile: {{.CertFile}}, keyFile: {{.KeyFile}}}}
  doq:
    - {address: 127.0.0.1:0, tls: {certFile: {{.CertFile}}, keyFile: {{.KeyFile}}}}
  doh:
    - {address: 127.0.0.1:0, tls: {certFile: {{.CertFile}}, keyFile: {{.KeyFile}}}}
  doh3:
    - {address: 127.0.0.1:0, tls: {certFile: {{.CertFile}}, keyFile: {{.KeyFile}}}}
{{- end}}
  api:
    address: 127.0.0.1:0
{{- if .APITLSOff}}
    tls:
      auto: "off"
{{- end}}
  ops:
    address: 127.0.0.1:0
  metrics:
    address: 127.0.0.1:0
  internal:
    address: 127.0.0.1:0
  blockPage:
    http: ""
upstreams:
  groups:
    default:
      servers: [127.0.0.1:1]
      timeout: 200ms
objectsDir: {{.ObjectsDir}}
{{- if .SettingsFile}}
settingsFile: {{.DataDir}}/settings.yaml
{{- end}}
auth:
  adminSocket:
    path: {{.DataDir}}/service.sock
`))

// kubeStore is the store section for the kube driver.
type kubeStore struct {
	StartupTimeout, SnapshotMaxAge time.Duration
}

// settings is what the options set over the defaults of newSettings; the
// exported fields are the template's.
type settings struct {
	// service.yaml
	Name                string
	DataDir, ObjectsDir string
	Lameduck            time.Duration
	Kube                *kubeStore
	APITLSOff           bool
	TLS                 *tlsFiles
	ProxyFrom           []string
	SettingsFile        bool
	extraYAML           string
	objects             map[string]string

	// the run
	environ     []string
	role        string
	lease       node.LeaseTimings
	nodeLease   time.Duration
	readyWithin time.Duration
	stopWithin  time.Duration
}

// Option changes the node's config or how it runs.
type Option func(*settings)

// Name sets node.name; the node's log lines are prefixed with it.
func Name(name string) Option { return func(s *settings) { s.Name = name } }

// Lameduck sets node.lameduck (200ms by default).
func Lameduck(d time.Duration) Option { return func(s *settings) { s.Lameduck = d } }

type tlsFiles struct{ CertFile, KeyFile string }

// TLS adds DoT, DoQ, DoH and DoH3 listeners on 127.0.0.1:0 with the
// certificate and key files; their addresses are in Addrs.DNS as
// "dot/...", "doq/...", "doh/..." and "doh3/...".
func TLS(certFile, keyFile string) Option {
	return func(s *settings) { s.TLS = &tlsFiles{certFile, keyFile} }
}

// ProxyProtocolFrom sets listeners.proxyProtocolFrom (PROXY v2 peers).
func ProxyProtocolFrom(prefixes ...string) Option {
	return func(s *settings) { s.ProxyFrom = append(s.ProxyFrom, prefixes...) }
}

// APITLSOff serves the API over plain HTTP (listeners.api.tls.auto: off).
func APITLSOff() Option { return func(s *settings) { s.APITLSOff = true } }

// KubeStore uses the kube store driver (KUBECONFIG comes from Env) with the
// startup timeout and the snapshot's maximum age.
func KubeStore(startupTimeout, snapshotMaxAge time.Duration) Option {
	return func(s *settings) { s.Kube = &kubeStore{startupTimeout, snapshotMaxAge} }
}

// SettingsFile keeps runtime settings in settings.yaml in the data dir.
func SettingsFile() Option { return func(s *settings) { s.SettingsFile = true } }

// ExtraYAML is appended to the config as it is (top-level keys).
func ExtraYAML(yaml string) Option {
	return func(s *settings) { s.extraYAML += yaml }
}

// Objects writes files (name to body) into the objects dir before the start.
func Objects(files map[string]string) Option {
	return func(s *settings) {
		if s.objects == nil {
			s.objects = map[string]string{}
		}
		for name, body := range files {
			s.objects[name] = body
		}
	}
}

// Dirs runs the node on the given data and objects directories instead of
// ones in its temp dir: a second Start with the same directories is a
// restart that keeps the store and the node's state.
func Dirs(dataDir, objectsDir string) Option {
	return func(s *settings) { s.DataDir, s.ObjectsDir = dataDir, objectsDir }
}

// Env adds environment variables (KEY=value) the node sees.
func Env(vars ...string) Option {
	return func(s *settings) { s.environ = append(s.environ, vars...) }
}

// Role runs the node in a role (node.RoleOperator, node.RoleDataplane).
func Role(role string) Option { return func(s *settings) { s.role = role } }

// Lease shortens the operator's leader election (lease, renew deadline, retry).
func Lease(l node.LeaseTimings) Option { return func(s *settings) { s.lease = l } }

// NodeLease shortens the node's own Lease on Kubernetes (renewed every
// quarter of it; GET /nodes lists a node not ready once it expired).
func NodeLease(d time.Duration) Option { return func(s *settings) { s.nodeLease = d } }

// ReadyWithin is how long Start waits for the node to be ready (60s by default).
func ReadyWithin(d time.Duration) Option { return func(s *settings) { s.readyWithin = d } }

// StopWithin is how long Stop waits for the node to stop (15s by default).
func StopWithin(d time.Duration) Option { return func(s *settings) { s.stopWithin = d } }

func newSettings(dir string, opts []Option) *settings {
	s := &settings{
		DataDir:     filepath.Join(dir, "data"),
		ObjectsDir:  filepath.Join(dir, "objects.d"),
		Lameduck:    200 * time.Millisecond,
		readyWithin: 60 * time.Second,
		stopWithin:  15 * time.Second,
	}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *settings) config() string {
	var b strings.Builder
	if err := baseConfig.Execute(&b, s); err != nil {
		panic(err) // the template and its data are fixed
	}
	return b.String() + s.extraYAML
}

// WriteConfig writes dir/service.yaml and the objects dir with its files,
// and returns the config's path.
func WriteConfig(t testing.TB, dir string, opts ...Option) string {
	t.Helper()
	return newSettings(dir, opts).write(t, dir)
}

func (s *settings) write(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(s.ObjectsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range s.objects {
		if err := os.WriteFile(filepath.Join(s.ObjectsDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "service.yaml")
	if err := os.WriteFile(path, []byte(s.config()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// Node is a node started by Start and stopped when its test ends.
type Node struct {
	Name       string
	Addrs      node.Addrs
	Dir        string // the temp dir with service.yaml, data and objects.d
	ConfigPath string
	ObjectsDir string
	Log        *Log

	t          testing.TB
	cancel     context.CancelFunc
	exited     chan struct{} // closed when node.Run has returned
	err        error         // what node.Run returned, once exited is closed
	stopWithin time.Duration
	stopOnce   sync.Once
}

// Start writes the config into a new temp dir, runs the node and waits until
// it is ready; an early error or no ready within ReadyWithin fails the test.
// The node is stopped when the test ends.
func Start(t testing.TB, opts ...Option) *Node {
	t.Helper()
	dir := t.TempDir()
	s := newSettings(dir, opts)
	n := &Node{
		Name: s.Name, Dir: dir, ConfigPath: s.write(t, dir), ObjectsDir: s.ObjectsDir,
		Log: NewLog(t, s.Name), t: t, exited: make(chan struct{}), stopWithin: s.stopWithin,
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	ready := make(chan node.Addrs, 1)
	go func() {
		defer close(n.exited)
		n.err = node.Run(ctx, node.Options{
			ConfigPath: n.ConfigPath, ConfigExplicit: true, Environ: s.environ, Role: s.role, Lease: s.lease, NodeLease: s.nodeLease,
			Stderr: n.Log, Ready: func(a node.Addrs) { ready <- a },
		})
	}()
	t.Cleanup(n.Stop)
	select {
	case n.Addrs = <-ready:
	case <-n.exited:
		t.Fatalf("node %sstopped before it was ready: %v", n.label(), n.err)
	case <-time.After(s.readyWithin):
		t.Fatalf("node %snot ready within %s", n.label(), s.readyWithin)
	}
	return n
}

func (n *Node) label() string {
	if n.Name == "" {
		return ""
	}
	return n.Name + " "
}

// Stop cancels the node and waits for it to return; the log stops mirroring
// to the test. It runs at the end of the test too; only the first call counts.
func (n *Node) Stop() {
	n.stopOnce.Do(func() {
		n.cancel()
		select {
		case <-n.exited:
		case <-time.After(n.stopWithin):
			// the goroutines say what the node is still waiting for
			var stacks strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&stacks, 1)
			n.t.Errorf("node %sdid not stop within %s; goroutines:\n%s", n.label(), n.stopWithin, stacks.String())
		}
		n.Log.stop()
	})
}

// Exited reports whether node.Run has returned, and what it returned.
func (n *Node) Exited() (bool, error) {
	select {
	case <-n.exited:
		return true, n.err
	default:
		return false, nil
	}
}

// DNSAddr is the address of the DNS listener for proto ("udp", "tcp"), or
// "" if there is none.
func (n *Node) DNSAddr(proto string) string {
	for _, a := range n.Addrs.DNS {
		if rest, ok := strings.CutPrefix(a, proto+"/"); ok {
			return rest
		}
	}
	return ""
}

// Exchange asks the node's DNS listener for proto about name and qtype.
func (n *Node) Exchange(proto string, timeout time.Duration, name string, qtype uint16) (*dns.Msg, error) {
	addr := n.DNSAddr(proto)
	if addr == "" {
		return nil, fmt.Errorf("no %s DNS listener in %v", proto, n.Addrs.DNS)
	}
	c := &dns.Client{Net: proto, Timeout: timeout}
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(name), qtype)
	r, _, err := c.Exchange(m, addr)
	return r, err
}

// Query is Exchange with a 2s timeout that fails the test on an error.
func (n *Node) Query(t testing.TB, proto, name string, qtype uint16) *dns.Msg {
	t.Helper()
	r, err := n.Exchange(proto, 2*time.Second, name, qtype)
	if err != nil {
		t.Fatalf("%s query %s: %v", proto, name, err)
	}
	return r
}

// Ready reports whether the ops listener's /healthz/ready answers 200.
func (n *Node) Ready() bool {
	resp, err := http.Get("http://" + n.Addrs.Ops + "/healthz/ready")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// Live reports whether the ops listener's /healthz/live answers 200.
func (n *Node) Live() bool {
	resp, err := http.Get("http://" + n.Addrs.Ops + "/healthz/live")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// Log keeps a node's log for the test to search and mirrors each write to
// t.Log (prefixed with the node's name, if any) until the node is stopped:
// stragglers after that are kept but not logged, as the test may have ended.
type Log struct {
	t      testing.TB
	prefix string
	mu     sync.Mutex
	b      strings.Builder
	done   bool
}

// NewLog is a Log for t; name, if not empty, prefixes the mirrored lines.
func NewLog(t testing.TB, name string) *Log {
	l := &Log{t: t}
	if name != "" {
		l.prefix = name + ": "
	}
	return l
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	if !l.done {
		l.t.Log(l.prefix + strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// Contains reports whether the log so far contains s.
func (l *Log) Contains(s string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Contains(l.b.String(), s)
}

func (l *Log) stop() {
	l.mu.Lock()
	l.done = true
	l.mu.Unlock()
}

// Eventually polls cond every 50ms until it holds, and fails the test if it
// does not within d.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(d, cond) {
		t.Fatalf("%s: not true within %s", what, d)
	}
}

// Within polls cond every 50ms until it holds or d has passed, and reports
// whether it held: for a caller that explains its own failure.
func Within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}
