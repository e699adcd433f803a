package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/doctor"
	"github.com/svcdns/svc/internal/edge"
	"github.com/svcdns/svc/internal/internalapi"
)

// edgeFlags are the flags of `svc edge render` and `svc edge run`.
type edgeFlags struct {
	c                                   edge.Config
	backends                            []string
	backendsFrom                        string
	secretFile                          string
	configDir                           string
	dnsdist                             string
	renderer                            string
	out                                 string
	pollZones                           bool
	zonePoll, debounce, drain, stopWait time.Duration
	internalPort                        int
	tokenFile, caFile, serverName       string
	healthAddress                       string
	requireBackends                     int
	logFormat, logLevel                 string
}

func (f *edgeFlags) register(cmd *cobra.Command, run bool) {
	d := edge.Defaults()
	fl := cmd.Flags()
	fl.StringSliceVar(&f.c.ACL, "acl", nil, "client networks allowed to query the edge (default: dnsdist's private ranges)")
	fl.StringVar(&f.c.API, "api", d.API, "dnsdist web server and API address (its key is generated, kept in --config-dir/api-key)")
	fl.StringSliceVar(&f.backends, "backends", nil, "static: node addresses ip[:port] or name=ip[:port]; internal: node IPs (their internal listener is asked); kubernetes: namespace/service of the data plane")
	fl.StringVar(&f.backendsFrom, "backends-from", "static", "where backends come from: static, internal (/internal/status of --backends) or kubernetes (EndpointSlices, ready endpoints)")
	fl.IntVar(&f.c.BackendPort, "backend-port", d.BackendPort, "the nodes' DNS port when an address names none")
	fl.IntVar(&f.c.CacheSize, "cache-size", d.CacheSize, "packet cache entries of the authoritative pool (0: no cache)")
	fl.BoolVar(&f.c.AuthoritativeCache, "authoritative-cache", d.AuthoritativeCache, "cache answers of the authoritative pool (per client; the resolver pool is never cached at the edge)")
	fl.IntVar(&f.c.CacheMaxTTL, "authoritative-cache-max-ttl", d.CacheMaxTTL, "longest time (seconds) the edge keeps an authoritative answer")
	fl.StringVar(&f.c.Console, "console", d.Console, "dnsdist console address (its key is generated, never logged)")
	fl.StringVar(&f.c.Listen, "listen", d.Listen, "address (or address:port, default port 53) of the Do53 listener")
	fl.StringSliceVar(&f.c.Protocols, "protocols", d.Protocols, "protocols to accept: do53, dot, doh, doq, doh3 (doq and doh3 need dnsdist 1.9+)")
	fl.StringVar(&f.c.DoT, "dot", "", "DoT listen address (default the --listen address, port 853)")
	fl.StringVar(&f.c.DoH, "doh", "", "DoH listen address (default the --listen address, port 443)")
	fl.StringVar(&f.c.DoQ, "doq", "", "DoQ listen address (default the --listen address, port 853)")
	fl.StringVar(&f.c.DoH3, "doh3", "", "DoH3 listen address (default the --listen address, port 443)")
	fl.StringVar(&f.c.TLSDir, "tls-dir", "", "directory with tls.crt and tls.key for DoT, DoH, DoQ and DoH3")
	fl.StringVar(&f.c.ClientIDDomain, "client-id-domain", "", "DoT/DoQ server names <id>.<domain> carry client ID <id> to the nodes (DoH: /dns-query/<id>)")
	fl.BoolVar(&f.c.Dynblocks, "dynblocks", false, "drop clients above --dynblocks-qps or --dynblocks-nxdomain-rate for 60s")
	fl.IntVar(&f.c.DynblocksQPS, "dynblocks-qps", d.DynblocksQPS, "queries per second (over 10s) that trigger a dynamic block")
	fl.IntVar(&f.c.DynblocksNXDomainRate, "dynblocks-nxdomain-rate", d.DynblocksNXDomainRate, "NXDOMAIN answers per second (over 10s) that trigger a dynamic block")
	fl.BoolVar(&f.c.EBPF, "ebpf", false, "drop blocked clients in the kernel with eBPF (needs CAP_SYS_ADMIN)")
	fl.StringSliceVar(&f.c.TransferSources, "transfer-source", nil, "networks allowed to ask for zone transfers through the edge (default: all pass to the nodes, whose ACL decides)")
	fl.IntVar(&f.internalPort, "internal-port", 8082, "the nodes' internal listener port (zones, status)")
	fl.BoolVar(&f.pollZones, "poll-zones", true, "ask the nodes for their zones and send those names to the authoritative pool")
	fl.DurationVar(&f.zonePoll, "zone-poll", 5*time.Second, "how often the nodes are asked for backends, zones and state")
	fl.StringVar(&f.renderer, "renderer", "", "configuration format: lua (dnsdist 1.7-1.9) or yaml (dnsdist 2.x) (default: by the installed dnsdist's version, else lua)")
	fl.IntVar(&f.c.Threads, "threads", d.Threads, "UDP listener and TCP worker threads of dnsdist")
	fl.StringVar(&f.c.PoolAuthoritative, "pool-authoritative", d.PoolAuthoritative, "load-balancing policy of the authoritative pool")
	fl.StringVar(&f.c.PoolResolver, "pool-resolver", d.PoolResolver, "load-balancing policy of the resolver pool (chashed keeps each name on one node's cache)")
	fl.StringVar(&f.secretFile, "proxy-protocol-secret-file", "", "the nodes' listeners.proxyProtocolSecretFile: sent in every PROXY v2 header (needed when the edge is not on loopback)")
	fl.StringVar(&f.dnsdist, "dnsdist", "dnsdist", "the dnsdist binary")
	fl.StringVar(&f.tokenFile, "internal-token-file", "", "the nodes' internal listener token (listeners.internal.tokenFile)")
	fl.StringVar(&f.caFile, "internal-ca-file", "", "CA of the nodes' internal listener certificate (listeners.internal.tls.caFile)")
	fl.StringVar(&f.serverName, "internal-server-name", internalapi.DefaultServerName, "name in the nodes' internal listener certificate")
	if run {
		fl.StringVar(&f.configDir, "config-dir", "/etc/dnsdist", "where the configuration and the API key are written (mode 0600)")
		fl.StringVar(&f.healthAddress, "health-address", ":8084", "the edge's /healthz/live and /healthz/ready")
		fl.IntVar(&f.requireBackends, "require-backends", 1, "ready only with at least this many backends up")
		fl.DurationVar(&f.debounce, "debounce", 5*time.Second, "wait for backends and zones to settle this long before applying a change")
		fl.DurationVar(&f.drain, "drain", time.Second, "a removed backend, or the edge stopping, drains this long first")
		fl.DurationVar(&f.stopWait, "stop-timeout", 10*time.Second, "time dnsdist gets to stop before it is killed")
		fl.StringVar(&f.logFormat, "log-format", "json", "log format: json or text")
		fl.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	} else {
		fl.StringVarP(&f.out, "output-file", "f", "", "write the configuration here (default: standard output)")
	}
}

// newEdgeCmd is `svc edge` (issue #25): render and run a dnsdist edge.
func newEdgeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "edge",
		Short: "Supervisor of a DNS load balancer (dnsdist) in front of the nodes",
		Long: "svc edge renders a dnsdist configuration for a load balancer in front of the nodes and supervises dnsdist:\n" +
			"PROXY v2 to the nodes (so they see each client), the nodes' zones to an authoritative pool, the rest to a\n" +
			"resolver pool, health checks with the internal health name, backends and zones followed at runtime.",
		Annotations: map[string]string{annotationGroup: "true"},
	}
	var rf, xf edgeFlags
	render := &cobra.Command{
		Use:   "render",
		Short: "Write the dnsdist configuration for the flags (console and API keys generated)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, src, _, err := rf.build(cmd.Context(), a, false)
			if err != nil {
				return err
			}
			if c.Backends, err = src.Backends(cmd.Context()); err != nil {
				return err
			}
			body, _, err := edge.Render(c)
			if err != nil {
				return err
			}
			if rf.out == "" {
				_, err = a.stdout.Write(body)
				return err
			}
			return os.WriteFile(rf.out, body, 0o600)
		},
	}
	rf.register(render, false)
	run := &cobra.Command{
		Use:   "run",
		Short: "Run dnsdist with the rendered configuration and follow the nodes until SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := edgeLogger(a, xf.logFormat, xf.logLevel)
			if err != nil {
				return err
			}
			c, src, nodes, err := xf.build(cmd.Context(), a, true)
			if err != nil {
				return err
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer cancel()
			s := &edge.Supervisor{Template: *c, Bin: xf.dnsdist, Dir: xf.configDir, Source: src, Nodes: nodes,
				Poll: xf.zonePoll, Debounce: xf.debounce, Drain: xf.drain, Stop: xf.stopWait,
				HealthAddress: xf.healthAddress, RequireBackends: xf.requireBackends, Log: log}
			return s.Run(ctx)
		},
	}
	xf.register(run, true)
	cmd.AddCommand(render, run)
	return cmd
}

func edgeLogger(a *app, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(a.stderr, opts)), nil
	case "text":
		return slog.New(slog.NewTextHandler(a.stderr, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want json or text", format)
}

// build turns the flags into a configuration and the backend source.
func (f *edgeFlags) build(ctx context.Context, a *app, run bool) (*edge.Config, edge.Source, *edge.Nodes, error) {
	d := edge.Defaults()
	c := f.c
	c.HealthInterval = d.HealthInterval
	c.Renderer = f.renderer
	if c.Renderer == "" || c.Renderer == "lua" || run {
		if v, err := edge.DetectVersion(ctx, f.dnsdist); err == nil {
			c.Version = v
			if c.Renderer == "" {
				c.Renderer = edge.RendererFor(v)
			}
			if run && c.Renderer != edge.RendererFor(v) {
				return nil, nil, nil, fmt.Errorf("--renderer %s does not match dnsdist %s, which reads %s", c.Renderer, v, edge.RendererFor(v))
			}
		} else if run {
			return nil, nil, nil, err
		}
	}
	if c.Renderer == "" {
		c.Renderer = "lua"
	}
	if f.secretFile != "" {
		s, err := proxyproto.LoadSecret(f.secretFile)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--proxy-protocol-secret-file: %w", err)
		}
		c.ProxySecret = s
	}
	// Fresh keys for every rendering and every run; never logged.
	c.ConsoleKey = make([]byte, 32)
	if _, err := rand.Read(c.ConsoleKey); err != nil {
		return nil, nil, nil, err
	}
	if !run {
		k := make([]byte, 24)
		if _, err := rand.Read(k); err != nil {
			return nil, nil, nil, err
		}
		c.APIKey = hex.EncodeToString(k)
	}
	var nodes *edge.Nodes
	needNodes := f.pollZones || f.backendsFrom == "internal"
	if needNodes {
		creds, err := f.internalCreds(a)
		switch {
		case err == nil:
			nodes = &edge.Nodes{Client: internalapi.NewClient(creds), Seeds: f.backends, InternalPort: f.internalPort, BackendPort: c.BackendPort}
		case run || f.backendsFrom == "internal":
			return nil, nil, nil, fmt.Errorf("%w; or pass --poll-zones=false to send every name to the resolver pool", err)
		}
	}
	var src edge.Source
	switch f.backendsFrom {
	case "static":
		b, err := edge.ParseBackends(f.backends, c.BackendPort)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(b) == 0 {
			return nil, nil, nil, errors.New("--backends: name the nodes' DNS addresses (ip[:port], comma separated)")
		}
		src = edge.Static(b)
	case "internal":
		if len(f.backends) == 0 {
			return nil, nil, nil, errors.New("--backends-from internal: --backends names the nodes' IPs")
		}
		src = nodes
	case "kubernetes":
		ns, svc, ok := strings.Cut(strings.Join(f.backends, ""), "/")
		if !ok || ns == "" || svc == "" || len(f.backends) != 1 {
			return nil, nil, nil, errors.New("--backends-from kubernetes: --backends is namespace/service of the data plane, e.g. service-system/service-dns")
		}
		rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--backends-from kubernetes: no Kubernetes configuration (in-cluster or KUBECONFIG): %w", err)
		}
		kc, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, nil, nil, err
		}
		src = &edge.Kube{Client: kc, Namespace: ns, Service: svc, Port: c.BackendPort}
	default:
		return nil, nil, nil, fmt.Errorf("--backends-from %q: want static, internal or kubernetes", f.backendsFrom)
	}
	if !f.pollZones {
		if nodes != nil && f.backendsFrom != "internal" {
			nodes = nil
		}
	}
	if run {
		if f.zonePoll <= 0 || f.debounce < 0 || f.drain < 0 || f.stopWait <= 0 {
			return nil, nil, nil, errors.New("--zone-poll and --stop-timeout must be positive, --debounce and --drain not negative")
		}
		if f.requireBackends < 0 {
			return nil, nil, nil, errors.New("--require-backends must not be negative")
		}
	}
	if err := c.Validate(); err != nil {
		return nil, nil, nil, err
	}
	return &c, src, nodes, nil
}

// internalCreds are the nodes' internal listener credentials: the token
// and CA files, else derived from the cluster's encryption key
// ($SERVICE_ENCRYPTION_KEY or _FILE) as the nodes derive them.
func (f *edgeFlags) internalCreds(a *app) (*internalapi.Credentials, error) {
	if f.tokenFile != "" || f.caFile != "" {
		return edge.InternalCredentials(f.tokenFile, f.caFile, f.serverName)
	}
	keys, err := auth.LoadKeys(auth.Env(a.env), "", false)
	if err != nil || len(keys.Current) == 0 {
		return nil, errors.New("the nodes' internal listener needs --internal-token-file and --internal-ca-file, or the cluster's encryption key in SERVICE_ENCRYPTION_KEY_FILE")
	}
	return internalapi.LoadCredentials(internalapi.Files{ServerName: f.serverName}, keys.Current)
}

// edgeHealth probes a running edge through dnsdist's API: the key comes
// from $SERVICE_DNSDIST_API_KEY, else the api-key file svc edge run keeps
// in its config dir ($SERVICE_EDGE_CONFIG_DIR, default /etc/dnsdist).
func edgeHealth(ctx context.Context, a *app, api string, requireBackends int, timeout time.Duration) error {
	key := a.env("SERVICE_DNSDIST_API_KEY")
	if key == "" {
		dir := firstNonEmpty(a.env("SERVICE_EDGE_CONFIG_DIR"), "/etc/dnsdist")
		b, err := os.ReadFile(filepath.Join(dir, edge.APIKeyFile))
		if err != nil {
			return fmt.Errorf("--dnsdist-api: no API key: set SERVICE_DNSDIST_API_KEY or SERVICE_EDGE_CONFIG_DIR (the edge's --config-dir): %w", err)
		}
		key = strings.TrimSpace(string(b))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	up, err := edge.BackendsUp(ctx, api, key)
	if err != nil {
		return err
	}
	if up < requireBackends {
		return fmt.Errorf("edge %s: %d backends up, %d required", api, up, requireBackends)
	}
	fmt.Fprintf(a.stdout, "edge %s: %d backends up\n", api, up)
	return nil
}

var renderedBy = regexp.MustCompile(`rendered by svc edge \((lua|yaml)`)

// doctorEdge checks a rendered edge configuration: it exists, is
// private, was rendered by svc edge, and dnsdist accepts it.
func doctorEdge(ctx context.Context, rep *doctor.Report, path string) {
	st, err := os.Stat(path)
	if err != nil {
		rep.Add("edge/config", doctor.Fail, "%v", err)
		return
	}
	if st.Mode().Perm()&0o077 != 0 {
		rep.Add("edge/permissions", doctor.Fail, "%s is mode %o: it holds the console and API keys; chmod 600 it", path, st.Mode().Perm())
	} else {
		rep.Add("edge/permissions", doctor.OK, "%s is private", path)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		rep.Add("edge/config", doctor.Fail, "%v", err)
		return
	}
	m := renderedBy.FindSubmatch(body)
	if m == nil {
		rep.Add("edge/config", doctor.Warn, "%s was not rendered by svc edge: svc edge run would replace it", path)
	}
	bin, err := exec.LookPath("dnsdist")
	if err != nil {
		rep.Add("edge/dnsdist", doctor.Fail, "dnsdist is not installed: install the dnsdist package")
		return
	}
	v, err := edge.DetectVersion(ctx, bin)
	if err != nil {
		rep.Add("edge/dnsdist", doctor.Fail, "%v", err)
		return
	}
	if m != nil && string(m[1]) != edge.RendererFor(v) {
		rep.Add("edge/renderer", doctor.Fail, "%s is %s but dnsdist %s reads %s: render again with --renderer %s", path, m[1], v, edge.RendererFor(v), edge.RendererFor(v))
		return
	}
	if err := edge.CheckConfig(ctx, bin, path); err != nil {
		rep.Add("edge/config", doctor.Fail, "%v", err)
		return
	}
	rep.Add("edge/config", doctor.OK, "dnsdist %s accepts %s", v, path)
}
