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
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/svcdns/svc/dataplane"
	"github.com/svcdns/svc/dataplane/ratelimit"
	"github.com/svcdns/svc/dataplane/transport"
	"github.com/svcdns/svc/dataplane/upstream"
	"github.com/svcdns/svc/internal/api"
	"github.com/svcdns/svc/internal/internalapi"
	"github.com/svcdns/svc/internal/objectsdir"
	"github.com/svcdns/svc/internal/settings"
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
	// Role is all (default), operator or dataplane (`svc serve --role`).
	Role string
}

// Addrs are the addresses the node's listeners are bound to.
type Addrs struct {
	Ops, Metrics string
	DNS          []string
	API          string
	Internal     string
}

// Run serves until ctx is cancelled or a lameduck period ends (SIGTERM, SIGINT or
// POST /lameduck), then shuts down cleanly.
func Run(ctx context.Context, opts Options) error {
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))

	mgr, err := settings.Load(ctx, settings.Options{
		ConfigPath:         opts.ConfigPath,
		ConfigPathExplicit: opts.ConfigExplicit,
		Environ:            opts.Environ,
		Logger:             logger,
	})
	if err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	cfg := mgr.Current()
	role, err := parseRole(opts.Role, cfg.Store.Driver)
	if err != nil {
		return err
	}
	kubeMode := cfg.Store.Driver == "kube"
	nodeName := cfg.Node.Name
	if nodeName == "" {
		nodeName, _ = os.Hostname()
	}
	logger = logger.With("node", nodeName, "role", role)

	ctx, stop := context.WithCancel(ctx)
	defer stop()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	life := NewLifecycle(func(ld bool) { logger.Info("lameduck", "on", ld) })
	ops := NewOps(life, cfg.Node.Lameduck)

	var servers []*http.Server
	var addrs Addrs
	serveHTTP := func(name, addr string, h http.Handler) (string, error) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return "", fmt.Errorf("%s listener %s: %w", name, addr, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
		servers = append(servers, srv)
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				logger.Error("listener failed", "listener", name, "err", err)
			}
		}()
		logger.Info("listening", "listener", name, "address", ln.Addr().String())
		return ln.Addr().String(), nil
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, s := range servers {
			_ = s.Shutdown(sctx)
		}
	}()

	if addrs.Ops, err = serveHTTP("ops", cfg.Listeners.Ops.Address, ops.Handler()); err != nil {
		return err
	}
	if cfg.Listeners.Metrics.Address != "" {
		mh := promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", mh)
		if addrs.Metrics, err = serveHTTP("metrics", cfg.Listeners.Metrics.Address, mux); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cfg.Node.DataDir, 0o755); err != nil {
		return fmt.Errorf("node.dataDir %s: %w", cfg.Node.DataDir, err)
	}
	validator, err := validation.New()
	if err != nil {
		return fmt.Errorf("object schemas: %w", err)
	}
	env := envLookup(opts.Environ)
	st, err := openStore(ctx, cfg, env, validator, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	ops.AddCheck("store", func() error {
		if ok, age := st.fresh(time.Now()); !ok {
			return fmt.Errorf("view of the store is %s old, over store.kube.snapshot.maxAge", age.Round(time.Second))
		}
		return nil
	})
	if err := ensureDefaultZone(ctx, st); err != nil {
		return err
	}
	objs := objectsdir.New(st, cfg.ObjectsDir, logger.With("component", "objectsdir"))
	if err := objs.ApplyInline(ctx, mgr.ConfigPath(), cfg.Objects); err != nil {
		// A bad inline object is reported and the node keeps serving what is stored.
		logger.Error("inline objects of the config file not applied", "err", err)
	}
	go func() {
		if err := objs.Run(ctx); err != nil && ctx.Err() == nil {
			logger.Error("objectsDir watch stopped", "dir", cfg.ObjectsDir, "err", err)
		}
	}()

	fwd, err := upstream.New(upstreamConfig(cfg), logger.With("component", "upstream"), reg)
	if err != nil {
		return fmt.Errorf("upstreams: %w", err)
	}
	pp, err := proxyPolicy(cfg)
	if err != nil {
		return err
	}
	dpCfg := dataplaneConfig(cfg, nodeName)
	dpCfg.ProxyProtocol = pp
	qlog, qlogger, err := openQueryLog(ctx, cfg, nodeName, reg, logger)
	if err != nil {
		return fmt.Errorf("query log: %w", err)
	}
	defer qlog.Close()
	defer qlogger.Close() // runs first: buffered records reach the writer
	dp, err := dataplane.New(dpCfg, dataplane.Options{Logger: logger.With("component", "dataplane"), Registerer: reg, QueryLogger: qlogger})
	if err != nil {
		return err
	}
	rlMetrics, err := ratelimit.NewMetrics(reg)
	if err != nil {
		return err
	}
	limiter, err := ratelimit.New(ratelimitConfig(cfg), rlMetrics)
	if err != nil {
		return fmt.Errorf("ratelimit: %w", err)
	}
	dp.SetRateLimiter(limiter)
	life.onChange = func(ld bool) {
		logger.Info("lameduck", "on", ld)
		dp.SetLameduck(ld)
	}
	hot := newHotConfig(cfg, fwd, logger)
	hot.querylog = func(c *settings.Config) error { return qlog.Update(querylogConfig(c, nodeName)) }
	hot.newLimiter = func(c *settings.Config) error {
		l, err := ratelimit.New(ratelimitConfig(c), rlMetrics)
		if err != nil {
			return err
		}
		dp.SetRateLimiter(l)
		return nil
	}
	defer hot.Close()
	snaps := newSnapshotter(st, dp, logger.With("component", "snapshot"), hot.snapshotInput)
	snaps.metrics = newNodeMetrics(reg)
	snaps.fresh = st.fresh
	if cfg.Store.Driver != "kube" {
		// On Kubernetes the operator's reconcilers write zone status.
		snaps.status = newZoneStatus(st, logger.With("component", "zonestatus"))
		go snaps.status.run(ctx)
	}
	blk, err := newBlocking(ctx, cfg, st, dp, nodeName, hot, logger)
	if err != nil {
		return fmt.Errorf("blocking: %w", err)
	}
	snaps.blocking = blk.compile
	if !kubeMode {
		// with the kube store the operator leader writes Policy status
		snaps.onPolicy = func(ns, name string) { blk.reconcilePolicy(ctx, ns, name) }
	}
	blk.changed = snaps.Trigger
	blk.metrics = snaps.metrics
	var internalCreds *internalapi.Credentials
	if kubeMode || cfg.Listeners.Internal.Address != "" {
		if internalCreds, err = internalCredentials(cfg, env); err != nil {
			return fmt.Errorf("internal listener: %w", err)
		}
	}
	if kubeMode && role != RoleDataplane {
		stopOperator, err := startOperator(ctx, cfg, st, blk, env, nodeName, logger)
		if err != nil {
			return err
		}
		defer stopOperator()
	}
	if kubeMode {
		cms, err := newConfigMaps(st.rest)
		if err != nil {
			return fmt.Errorf("configmap reader: %w", err)
		}
		blk.follow = &listFollower{st: st, fetcher: blk.fetcher, client: internalapi.NewClient(internalCreds),
			peers: parsePeers(env(PeersEnv)), allowDegraded: cfg.Blocking.AllowDegraded, configMaps: cms,
			log: logger.With("component", "listfollower")}
	}
	if role != RoleOperator {
		initial := make(chan error, 1)
		go func() {
			if err := blk.run(ctx, cfg, initial); err != nil && ctx.Err() == nil {
				logger.Error("block list reconciler stopped", "err", err)
			}
		}()
		if err := waitInitialLists(ctx, cfg.Blocking.InitStrategy, initial, logger); err != nil {
			return err
		}
	}
	go func() {
		if err := mgr.Watch(ctx); err != nil && ctx.Err() == nil {
			logger.Error("settings file watch stopped", "err", err)
		}
	}()
	go hot.follow(mgr.Subscribe(ctx), dp, snaps, reg)
	snapErr := make(chan error, 1)
	if role != RoleOperator {
		ops.AddCheck("snapshot", snaps.Ready)
		go func() { snapErr <- snaps.Run(ctx) }()
	}
	var apiErr chan error
	if role != RoleOperator { // DNS listeners and the API
		if err := dp.Start(ctx); err != nil {
			return fmt.Errorf("dns listeners: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = dp.Shutdown(sctx)
		}()
		for _, a := range dp.UDPAddrs() {
			addrs.DNS = append(addrs.DNS, "udp/"+a.String())
		}
		for _, a := range dp.TCPAddrs() {
			addrs.DNS = append(addrs.DNS, "tcp/"+a.String())
		}
		tp, err := transport.New(dp, transportConfig(cfg, pp), transport.Options{Logger: logger.With("component", "transport"), Registerer: reg})
		if err != nil {
			return fmt.Errorf("encrypted DNS listeners: %w", err)
		}
		if err := tp.Start(ctx); err != nil {
			return fmt.Errorf("encrypted DNS listeners: %w", err)
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tp.Shutdown(sctx)
		}()
		for _, kind := range []string{"dot", "doh", "doq", "doh3"} {
			for _, a := range tp.Addrs(kind) {
				addrs.DNS = append(addrs.DNS, kind+"/"+a.String())
			}
		}
		logger.Info("dns listening", "addresses", addrs.DNS)

		bearers, err := kubeBearer(cfg, st, logger)
		if err != nil {
			return fmt.Errorf("api: kubernetes tokens: %w", err)
		}
		apiOpts, err := apiOptions(cfg, nodeName, opts.Environ)
		if err != nil {
			return err
		}
		idps, err := identityProviders(cfg, st, namespace(env), logger)
		if err != nil {
			return fmt.Errorf("api: %w", err)
		}
		apiOpts.Stdout = opts.Stderr
		apiSrv, err := api.New(ctx, apiOpts, api.Deps{
			Store: st, Settings: settingsService{mgr}, DNS: dnsService{dp: dp, toggle: blk.toggle, node: nodeName},
			Messages: messages{objs: objs, node: nodeName}, Kinds: validator, Admitter: validator,
			Bearer: bearers, OIDC: idps, Logger: logger.With("component", "api"),
			QueryLog: qlog, Catalogue: catalogueData{blk.cat}, Policies: policyStates{blk},
			BlockListRules: listRules{blk}, BlockListRefresher: listRefresher{blk},
			Cluster: clusterInfo{driver: cfg.Store.Driver, node: nodeName, address: cfg.Listeners.API.Address, ready: func() bool { return ops.readiness().Ready }},
		})
		if err != nil {
			return fmt.Errorf("api: %w", err)
		}
		defer apiSrv.Close()
		apiLn, err := net.Listen("tcp", cfg.Listeners.API.Address)
		if err != nil {
			return fmt.Errorf("api listener %s: %w", cfg.Listeners.API.Address, err)
		}
		addrs.API = apiLn.Addr().String()
		apiErr = make(chan error, 1)
		go func() { apiErr <- apiSrv.ServeListener(ctx, apiLn) }()
		logger.Info("listening", "listener", "api", "address", addrs.API, "base", apiSrv.BasePath())
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
	}

	if a := cfg.Listeners.Internal.Address; a != "" {
		creds := internalCreds
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return fmt.Errorf("internal listener %s: %w", a, err)
		}
		addrs.Internal = ln.Addr().String()
		go func() {
			deps := internalapi.Deps{Status: internalDeps{node: nodeName, snaps: snaps, ops: ops, store: st}, Zones: internalDeps{node: nodeName, snaps: snaps, ops: ops, store: st}, Lists: blk.fetcher, Logger: logger.With("component", "internal")}
			if err := internalapi.Serve(ctx, ln, creds, deps); err != nil && ctx.Err() == nil {
				logger.Error("internal listener stopped", "err", err)
			}
		}()
		logger.Info("listening", "listener", "internal", "address", addrs.Internal)
	}

	if opts.Ready != nil {
		opts.Ready(addrs)
	}

	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	for {
		select {
		case <-ctx.Done():
			logger.Info("stopping")
			return nil
		case err := <-apiErr:
			if ctx.Err() == nil {
				return err
			}
		case err := <-snapErr:
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("snapshots: %w", err)
			}
		case s := <-sig:
			if ld, _ := life.State(); ld {
				logger.Info("second signal, stopping now", "signal", s.String())
				return nil
			}
			logger.Info("signal, entering lameduck", "signal", s.String(), "for", cfg.Node.Lameduck)
			life.Lameduck(cfg.Node.Lameduck)
		case <-life.Done():
			logger.Info("lameduck period over, stopping")
			return nil
		}
	}
}
