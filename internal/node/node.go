// Package node runs one server process: it loads settings, opens the store, builds
// and swaps data-plane snapshots, and runs every listener until it is told to stop.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/proxyproto"
	"github.com/svcdns/svc/dataplane/ratelimit"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/objectsdir"
	"github.com/svcdns/svc/internal/querylog"
	"github.com/svcdns/svc/internal/settings"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/validation"
)

// Options are what `svc serve` hands the node.
type Options struct {
	ConfigPath     string
	ConfigExplicit bool // the path was given on the command line: it must exist
	Environ        []string
	Stderr         io.Writer
	// Ready, when set, receives the bound addresses once every listener is up.
	Ready func(Addrs)
	// OpsUp, when set, receives the ops listener's address as soon as it
	// serves: health checks answer there while the node is still starting.
	OpsUp func(addr string)
	// Role is all (default), operator or dataplane (`svc serve --role`).
	Role string
	// Lease tunes the operator's leader election; zero fields take the
	// defaults (15s lease, 10s renew deadline, 2s retry). Tests shorten it.
	Lease LeaseTimings
	// NodeLease is how long a node's own Lease lasts on Kubernetes (zero:
	// DefaultNodeLease); it is renewed every quarter of it. Tests shorten it.
	NodeLease time.Duration
}

// LeaseTimings are the leader-election durations of the operator.
type LeaseTimings struct {
	Duration, RenewDeadline, RetryPeriod time.Duration
}

// Addrs are the addresses the node's listeners are bound to.
type Addrs struct {
	Ops, Metrics string
	DNS          []string
	API          string
	Internal     string
	// BlockPageHTTP and BlockPageHTTPS are the block page listeners
	// (empty when off or blockPage.enabled is false).
	BlockPageHTTP, BlockPageHTTPS string
	// ExternalDNS and ExternalDNSHealth are the external-dns webhook's
	// listeners (empty when externalDNS.webhook.enabled is false).
	ExternalDNS, ExternalDNSHealth string
}

// Run serves until ctx is cancelled or a lameduck period ends (SIGTERM, SIGINT or
// POST /lameduck), then shuts down cleanly.
//
// The steps below start the parts of a node in dependency order; each
// registers how to stop what it started (proc.onStop), and everything stops
// in reverse order when Run returns. The operator role runs the store,
// blocking reconcilers and operator only; the data-plane and all roles add
// the DNS listeners and the API.
func Run(ctx context.Context, opts Options) error {
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	p := &proc{opts: opts, logger: slog.New(slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	defer p.stop()
	ctx, cancel := context.WithCancel(ctx)
	p.onStop(cancel)
	steps := []func(context.Context) error{
		p.loadSettings, p.shareSettings, p.startOps, p.openState, p.startDataPlane, p.startHeartbeat, p.startBlocking, p.startSnapshots,
		p.startServing, p.startExternalDNS, p.startPublish, p.startInternal, p.startBlockPage,
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if opts.Ready != nil {
		opts.Ready(p.addrs)
	}
	// Only now ready: the snapshot is often built before the DNS and API
	// listeners are bound, and a query sent on the first "ready" must be
	// answered (a probe or a load generator starts right away).
	p.started.Store(true)
	var snapReady func() error
	if p.snaps != nil {
		snapReady = p.snaps.Ready
	}
	go releaseStartupMemory(ctx, p.logger, snapReady)
	return p.wait(ctx)
}

// proc is the state of one Run.
type proc struct {
	opts     Options
	started  atomic.Bool // every start step done: ready (with the checks)
	logger   *slog.Logger
	mgr      *settings.Manager
	cfg      *settings.Config
	role     string
	kubeMode bool
	nodeName string
	xfr      *transfers // zone transfers and NOTIFY (notify.go)
	limits   connLimits // connections per listener (connlimit.go)
	env      func(string) string
	reg      *prometheus.Registry
	life     *Lifecycle
	ops      *Ops
	addrs    Addrs
	stops    []func()

	validator *validation.Validator
	st        *openedStore
	objs      *objectsdir.Applier
	fwd       *upstream.Resolver
	pp        *proxyproto.Policy
	qlog      *querylog.Writer
	dp        *dataplane.Server
	hot       *hotConfig
	snaps     *snapshotter
	blk       *blocking
	creds     *internalapi.Credentials
	leases    *nodeLeases // this node's Lease on Kubernetes (nodelease.go)
	apiSrv    *api.Server // nil in the operator role
	apiErr    chan error
	snapErr   chan error
	loops     sync.WaitGroup // loops that write the store or dataDir (spawn)
}

// loopsGrace bounds how long Run, returning, waits for its loops after
// ctx is cancelled; each of them stops on ctx within milliseconds.
const loopsGrace = 10 * time.Second

// stoppedEarly reports whether err, from a loop that runs for the whole
// of Run, is worth logging: not the end of Run (ctx done) nor the store
// closed by Run's stops, which run before ctx is cancelled (a failed start
// closes the store under loops that are still starting).
func stoppedEarly(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() == nil && !errors.Is(err, store.ErrClosed)
}

// onStop registers f to run when Run returns, before what was registered
// earlier (like defer).
func (p *proc) onStop(f func()) { p.stops = append(p.stops, f) }

// spawn runs loop in a goroutine that Run waits for before it returns, so
// nothing Run started still writes in node.dataDir (the store, list and
// zone files) once it has returned: a caller may remove or reuse the
// directory then.
func (p *proc) spawn(loop func()) {
	p.loops.Add(1)
	go func() {
		defer p.loops.Done()
		loop()
	}()
}

func (p *proc) stop() {
	for i := len(p.stops) - 1; i >= 0; i-- {
		p.stops[i]()
	}
	done := make(chan struct{})
	go func() { p.loops.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(loopsGrace):
		p.logger.Warn("some loops were still running when the node stopped", "waited", loopsGrace)
	}
}

func (p *proc) loadSettings(ctx context.Context) error {
	mgr, err := settings.Load(ctx, settings.Options{
		ConfigPath:         p.opts.ConfigPath,
		ConfigPathExplicit: p.opts.ConfigExplicit,
		Environ:            p.opts.Environ,
		Logger:             p.logger,
	})
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	p.mgr, p.cfg = mgr, mgr.Current()
	if p.role, err = parseRole(p.opts.Role, p.cfg.Store.Driver); err != nil {
		return err
	}
	p.kubeMode = p.cfg.Store.Driver == "kube"
	p.nodeName = p.cfg.Node.Name
	if p.nodeName == "" {
		p.nodeName, _ = os.Hostname()
	}
	p.logger = p.logger.With("node", p.nodeName, "role", p.role)
	p.env = envLookup(p.opts.Environ)
	return nil
}

// startOps serves health checks and metrics first, so a node that is still
// starting answers "not ready" rather than nothing.
func (p *proc) startOps(context.Context) error {
	p.reg = prometheus.NewRegistry()
	p.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	p.life = NewLifecycle(func(ld bool) { p.logger.Info("lameduck", "on", ld) })
	p.ops = NewOps(p.life, p.cfg.Node.Lameduck)
	var err error
	p.ops.AddCheck("listeners", func() error {
		if !p.started.Load() {
			return errors.New("starting: listeners not open yet")
		}
		return nil
	})
	if p.addrs.Ops, err = p.serveHTTP("ops", p.cfg.Listeners.Ops.Address, p.ops.Handler()); err != nil {
		return err
	}
	if p.opts.OpsUp != nil {
		p.opts.OpsUp(p.addrs.Ops)
	}
	if p.cfg.Listeners.Metrics.Address != "" {
		mux := http.NewServeMux()
		var g prometheus.Gatherer = p.reg
		if p.kubeMode && p.role != RoleDataplane {
			// controller-runtime counts reconciles, errors, workqueue depth
			// and leadership (leader_election_master_status) in its own
			// registry; the operator serves them beside its own series.
			g = prometheus.Gatherers{p.reg, withoutRuntime{ctrlmetrics.Registry}}
		}
		mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{Registry: p.reg}))
		if p.addrs.Metrics, err = p.serveHTTP("metrics", p.cfg.Listeners.Metrics.Address, mux); err != nil {
			return err
		}
	}
	return nil
}

func (p *proc) serveHTTP(name, addr string, h http.Handler) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s listener %s: %w", name, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(p.logger.Handler(), slog.LevelWarn)}
	p.onStop(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			p.logger.Error("listener failed", "listener", name, "err", err)
		}
	}()
	p.logger.Info("listening", "listener", name, "address", ln.Addr().String())
	return ln.Addr().String(), nil
}

// openState opens the store, makes sure the default zone exists and starts
// following objectsDir and the config file's inline objects.
func (p *proc) openState(ctx context.Context) error {
	cfg := p.cfg
	if err := os.MkdirAll(cfg.Node.DataDir, 0o755); err != nil {
		return fmt.Errorf("node.dataDir %s: %w", cfg.Node.DataDir, err)
	}
	var err error
	if p.validator, err = validation.New(); err != nil {
		return fmt.Errorf("object schemas: %w", err)
	}
	if p.st, err = openStore(ctx, cfg, p.env, p.validator, p.logger); err != nil {
		return err
	}
	st := p.st
	p.onStop(func() { st.Close() })
	p.ops.AddCheck("store", func() error {
		if ok, age := st.fresh(time.Now()); !ok {
			return fmt.Errorf("view of the store is %s old, over store.kube.snapshot.maxAge", age.Round(time.Second))
		}
		return nil
	})
	if err := ensureDefaultZone(ctx, st); err != nil {
		return err
	}
	p.objs = objectsdir.New(st, cfg.ObjectsDir, p.logger.With("component", "objectsdir"))
	if err := p.objs.ApplyInline(ctx, p.mgr.ConfigPath(), cfg.Objects); err != nil {
		// A bad inline object is reported and the node keeps serving what is stored.
		p.logger.Error("inline objects of the config file not applied", "err", err)
	}
	p.spawn(func() {
		if err := p.objs.Run(ctx); stoppedEarly(ctx, err) {
			p.logger.Error("objectsDir watch stopped", "dir", cfg.ObjectsDir, "err", err)
		}
	})
	return nil
}

// startDataPlane builds the forwarder, the query log and the data plane
// (not yet listening) and the settings that change them while running.
func (p *proc) startDataPlane(ctx context.Context) error {
	cfg, logger := p.cfg, p.logger
	var err error
	if p.fwd, err = upstream.New(upstreamConfig(cfg), logger.With("component", "upstream"), p.reg); err != nil {
		return fmt.Errorf("upstreams: %w", err)
	}
	if p.pp, err = proxyPolicy(cfg); err != nil {
		return err
	}
	dpCfg := dataplaneConfig(cfg, p.nodeName)
	dpCfg.ProxyProtocol = p.pp
	mem, fds := memLimit("/"), nofile()
	if mem > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// In a container with a memory limit, let the garbage collector
		// work harder near it rather than be killed at it.
		debug.SetMemoryLimit(int64(mem / 10 * 9))
	}
	p.limits = connLimit(fds, mem, streamPools(cfg), len(cfg.Listeners.DoQ)+len(cfg.Listeners.DoH3))
	dpCfg.TCPMaxConns = p.limits.Stream
	logger.Info("connection limit", "per_listener", p.limits.Stream, "doq_per_listener", p.limits.QUIC, "fd_limit", fds, "memory_limit", mem)
	qlog, qlogger, err := openQueryLog(ctx, cfg, p.nodeName, p.reg, logger)
	if err != nil {
		return fmt.Errorf("query log: %w", err)
	}
	p.qlog = qlog
	p.onStop(func() { qlog.Close() })
	p.onStop(func() { qlogger.Close() }) // runs first: buffered records reach the writer
	dp, err := dataplane.New(dpCfg, dataplane.Options{Logger: logger.With("component", "dataplane"), Registerer: p.reg, QueryLogger: qlogger})
	if err != nil {
		return err
	}
	p.dp = dp
	rlMetrics, err := ratelimit.NewMetrics(p.reg)
	if err != nil {
		return err
	}
	limiter, err := ratelimit.New(ratelimitConfig(cfg), rlMetrics)
	if err != nil {
		return fmt.Errorf("ratelimit: %w", err)
	}
	dp.SetRateLimiter(limiter)
	p.life.onChange = func(ld bool) {
		logger.Info("lameduck", "on", ld)
		dp.SetLameduck(ld)
	}
	p.hot = newHotConfig(cfg, p.fwd, logger)
	p.hot.querylog = func(c *settings.Config) error { return qlog.Update(querylogConfig(c, p.nodeName)) }
	p.hot.newLimiter = func(c *settings.Config) error {
		l, err := ratelimit.New(ratelimitConfig(c), rlMetrics)
		if err != nil {
			return err
		}
		dp.SetRateLimiter(l)
		return nil
	}
	p.onStop(p.hot.Close)
	p.snaps = newSnapshotter(p.st, dp, logger.With("component", "snapshot"), p.hot.snapshotInput)
	p.snaps.metrics = newNodeMetrics(p.reg)
	p.snaps.fresh = p.st.fresh
	p.snaps.settingsNow = p.hot.current
	if p.xfr, err = newTransfers(cfg, dp, p.reg, logger.With("component", "xfr")); err != nil {
		return fmt.Errorf("zone transfers: %w", err)
	}
	p.snaps.onServed = p.xfr.served
	p.spawn(func() { p.xfr.run(ctx) })
	if !p.kubeMode {
		// On Kubernetes the operator's reconcilers write zone status.
		p.snaps.status = newZoneStatus(p.st, logger.With("component", "zonestatus"))
		st := p.snaps.status
		p.spawn(func() { st.run(ctx) })
	}
	return nil
}

// startBlocking compiles block lists and policies (file store), or starts
// the operator and the list follower (kube store), and waits for the first
// lists as blocking.initStrategy says.
func (p *proc) startBlocking(ctx context.Context) error {
	cfg, logger := p.cfg, p.logger
	blk, err := newBlocking(ctx, cfg, p.st, p.dp, p.nodeName, p.hot, logger)
	if err != nil {
		return fmt.Errorf("blocking: %w", err)
	}
	p.blk = blk
	blk.setTenancy(cfg, namespace(p.env))
	p.snaps.blocking = blk.compile
	p.snaps.listGens = blk.listGenerations
	blk.changed = p.snaps.Trigger
	blk.metrics = p.snaps.metrics
	if p.kubeMode || cfg.Listeners.Internal.Address != "" {
		if p.creds, err = internalCredentials(cfg, p.env); err != nil {
			return fmt.Errorf("internal listener: %w", err)
		}
	}
	if p.kubeMode && p.role != RoleDataplane {
		stopOperator, live, err := startOperator(ctx, cfg, p.st, blk, p.env, p.nodeName, p.opts.Lease, logger)
		if err != nil {
			return err
		}
		p.ops.AddLiveCheck("operator", live)
		p.onStop(stopOperator)
	}
	if p.kubeMode {
		cms, err := newConfigMaps(p.st.rest)
		if err != nil {
			return fmt.Errorf("configmap reader: %w", err)
		}
		blk.follow = &listFollower{st: p.st, fetcher: blk.fetcher, client: internalapi.NewClient(p.creds),
			peers: parsePeers(p.env(PeersEnv)), allowDegraded: cfg.Blocking.AllowDegraded, configMaps: cms,
			log: logger.With("component", "listfollower")}
	}
	if p.role == RoleOperator {
		return nil
	}
	initial, first := make(chan error, 1), make(chan error, 1)
	p.spawn(func() {
		if err := blk.run(ctx, cfg, first); stoppedEarly(ctx, err) {
			logger.Error("block list reconciler stopped", "err", err)
		}
	})
	go func() {
		// The first pass is over: policies compiled from now on name lists
		// that had their chance to load, so their problems are logged (a
		// rebuild logs those that remain).
		for err := range first {
			initial <- err
		}
		blk.listsLoaded.Store(true)
		close(initial)
		p.snaps.Trigger()
	}()
	return waitInitialLists(ctx, cfg.Blocking.InitStrategy, initial, logger)
}

// startSnapshots follows the settings file and starts building snapshots
// (not on the operator role, which serves no DNS).
func (p *proc) startSnapshots(ctx context.Context) error {
	go func() {
		if err := p.mgr.Watch(ctx); err != nil && ctx.Err() == nil {
			p.logger.Error("settings file watch stopped", "err", err)
		}
	}()
	go p.hot.follow(p.mgr.Subscribe(ctx), p.dp, p.snaps, p.reg)
	p.snapErr = make(chan error, 1)
	if p.role != RoleOperator {
		p.ops.AddCheck("snapshot", p.snaps.Ready)
		p.spawn(func() { p.snapErr <- p.snaps.Run(ctx) })
	}
	return nil
}

// startServing starts the DNS listeners (plain and encrypted), the API and
// the admin socket; the operator role has none of them.
func (p *proc) startServing(ctx context.Context) error {
	if p.role == RoleOperator {
		return nil
	}
	if err := p.startDNS(ctx); err != nil {
		return err
	}
	return p.startAPI(ctx)
}

func (p *proc) startDNS(ctx context.Context) error {
	dp := p.dp
	if err := dp.Start(ctx); err != nil {
		return fmt.Errorf("dns listeners: %w", err)
	}
	p.onStop(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = dp.Shutdown(sctx)
	})
	for _, a := range dp.UDPAddrs() {
		p.addrs.DNS = append(p.addrs.DNS, "udp/"+a.String())
	}
	for _, a := range dp.TCPAddrs() {
		p.addrs.DNS = append(p.addrs.DNS, "tcp/"+a.String())
	}
	tp, err := transport.New(dp, transportConfig(p.cfg, p.pp, p.limits), transport.Options{Logger: p.logger.With("component", "transport"), Registerer: p.reg})
	if err != nil {
		return fmt.Errorf("encrypted DNS listeners: %w", err)
	}
	if err := tp.Start(ctx); err != nil {
		return fmt.Errorf("encrypted DNS listeners: %w", err)
	}
	p.onStop(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
	})
	for _, kind := range []string{"dot", "doh", "doq", "doh3"} {
		for _, a := range tp.Addrs(kind) {
			p.addrs.DNS = append(p.addrs.DNS, kind+"/"+a.String())
		}
	}
	p.logger.Info("dns listening", "addresses", p.addrs.DNS)
	return nil
}

func (p *proc) startAPI(ctx context.Context) error {
	cfg, logger, st, blk := p.cfg, p.logger, p.st, p.blk
	bearers, err := kubeBearer(cfg, st, logger)
	if err != nil {
		return fmt.Errorf("api: kubernetes tokens: %w", err)
	}
	apiOpts, err := apiOptions(cfg, p.nodeName, p.opts.Environ)
	if err != nil {
		return err
	}
	idps, err := identityProviders(cfg, st, namespace(p.env), logger)
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	apiOpts.Stdout = p.opts.Stderr
	if p.creds != nil {
		// Chain step 5: peers and the edge balancer read with the internal token.
		apiOpts.InternalToken = p.creds.Token
	}
	apiSrv, err := api.New(ctx, apiOpts, api.Deps{
		Store: st, Settings: settingsService{p.mgr}, DNS: dnsService{dp: p.dp, toggle: blk.toggle, node: p.nodeName},
		Messages: messages{objs: p.objs, node: p.nodeName}, Kinds: p.validator, Admitter: p.validator,
		Bearer: bearers, OIDC: idps, Logger: logger.With("component", "api"),
		QueryLog: p.qlog, Catalogue: catalogueData{blk.cat}, Policies: policyStates{blk},
		BlockListRules: listRules{blk}, BlockListRefresher: listRefresher{blk},
		Cluster:    p.clusterView(),
		Visibility: visibility{snaps: p.snaps, settings: p.mgr.Current},
		Doctor:     doctorSource{p},
		Notifier:   p.xfr,
		Forwarder:  p.forwarder(),
	})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	p.onStop(func() { apiSrv.Close() })
	p.apiSrv = apiSrv
	// auth.session.* and auth.tokens.maxLifetime apply without a restart.
	go func() {
		for c := range p.mgr.Subscribe(ctx) {
			apiSrv.SetAuthLimits(authLimits(c))
		}
	}()
	apiLn, err := net.Listen("tcp", cfg.Listeners.API.Address)
	if err != nil {
		return fmt.Errorf("api listener %s: %w", cfg.Listeners.API.Address, err)
	}
	p.addrs.API = apiLn.Addr().String()
	p.apiErr = make(chan error, 1)
	go func() { p.apiErr <- apiSrv.ServeListener(ctx, apiLn) }()
	logger.Info("listening", "listener", "api", "address", p.addrs.API, "base", apiSrv.BasePath())
	if apiOpts.AdminSocketPath != "" {
		adminLn, err := apiSrv.ListenAdminSocket()
		if err != nil {
			return fmt.Errorf("admin socket %s: %w", apiOpts.AdminSocketPath, err)
		}
		go func() {
			if err := apiSrv.ServeAdminListener(ctx, adminLn); err != nil && ctx.Err() == nil {
				logger.Error("admin socket stopped", "err", err)
			}
		}()
		logger.Info("listening", "listener", "admin", "path", apiOpts.AdminSocketPath)
	}
	return nil
}

// startInternal serves the node-to-node listener (list bodies by digest,
// status and zones for peers).
func (p *proc) startInternal(ctx context.Context) error {
	a := p.cfg.Listeners.Internal.Address
	if a == "" {
		return nil
	}
	ln, err := net.Listen("tcp", a)
	if err != nil {
		return fmt.Errorf("internal listener %s: %w", a, err)
	}
	p.addrs.Internal = ln.Addr().String()
	if p.leases != nil {
		p.leases.setInternal(p.addrs.Internal) // peers forward node= reads here
	}
	d := internalDeps{node: p.nodeName, snaps: p.snaps, ops: p.ops, store: p.st, role: p.role}
	if p.blk != nil && p.blk.toggle != nil {
		tg := p.blk.toggle
		d.blocking = func() bool { return tg.State().Blocking }
	}
	deps := internalapi.Deps{Status: d, Zones: d, Lists: p.blk.fetcher, Logger: p.logger.With("component", "internal")}
	if p.apiSrv != nil {
		deps.API = forwardedAPI(p.apiSrv) // peers' node= reads (api/nodeforward.go)
	}
	if !p.kubeMode {
		// Multi-node SQLite mode: peers push cluster settings here, and a
		// PATCH /settings served here reaches them (sharedsettings.go).
		deps.Settings = p.mgr
		if peers := parsePeers(p.env(PeersEnv)); len(peers) > 0 {
			p.mgr.OnClusterChange(peerSettings{client: internalapi.NewClient(p.creds), peers: peers,
				log: p.logger.With("component", "settings")}.push)
		}
	}
	go func() {
		if err := internalapi.Serve(ctx, ln, p.creds, deps); err != nil && ctx.Err() == nil {
			p.logger.Error("internal listener stopped", "err", err)
		}
	}()
	p.logger.Info("listening", "listener", "internal", "address", p.addrs.Internal)
	return nil
}

// wait serves until ctx ends, the API or the snapshots fail, or a signal's
// lameduck period is over (a second signal stops at once).
func (p *proc) wait(ctx context.Context) error {
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			p.logger.Info("stopping")
			return nil
		case err := <-p.apiErr:
			if ctx.Err() == nil {
				return err
			}
		case err := <-p.snapErr:
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("snapshots: %w", err)
			}
		case s := <-sig:
			if ld, _ := p.life.State(); ld {
				p.logger.Info("second signal, stopping now", "signal", s.String())
				return nil
			}
			p.logger.Info("signal, entering lameduck", "signal", s.String(), "for", p.cfg.Node.Lameduck)
			p.life.Lameduck(p.cfg.Node.Lameduck)
		case <-p.life.Done():
			p.logger.Info("lameduck period over, stopping")
			return nil
		}
	}
}
