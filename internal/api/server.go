// Package api serves the REST API under {pathPrefix}/api/v1 (huma v2 on a
// net/http ServeMux) and the admin socket /admin/v1.
package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/svcdns/svc/internal/auth"
	"github.com/svcdns/svc/internal/auth/audit"
	"github.com/svcdns/svc/internal/dashboard"
	"github.com/svcdns/svc/internal/oidc"
	"github.com/svcdns/svc/internal/store"
	"github.com/svcdns/svc/internal/validation"
	"github.com/svcdns/svc/internal/version"
)

// Local login modes of auth.localLogin.
const (
	LocalLoginEnabled    = "enabled"
	LocalLoginAdminsOnly = "admins-only"
	LocalLoginDisabled   = "disabled"
)

// DefaultNamespace holds internal objects outside Kubernetes.
const DefaultNamespace = "service-system"

// Options configure the API server; the lead maps settings onto them.
type Options struct {
	// Address to listen on (listeners.api.address), default 0.0.0.0:8080.
	Address string
	// TLSAuto is "selfsigned" (default) or "off" (listeners.api.tls.auto).
	TLSAuto string
	// TLSCertFile and TLSKeyFile take precedence over TLSAuto.
	TLSCertFile, TLSKeyFile string
	// PathPrefix mounts the API at {PathPrefix}/api/v1 (listeners.api.pathPrefix).
	PathPrefix string
	// TrustedProxies may set X-Forwarded-For and X-Forwarded-Proto.
	TrustedProxies []netip.Prefix
	// DataDir holds keys, the self-signed certificate and audit.db.
	DataDir string
	// Namespace holds internal objects (default service-system).
	Namespace string
	// NodeName names this node in answers and audit events.
	NodeName string

	// LocalLogin is enabled (default), admins-only or disabled.
	LocalLogin string
	// AdminPasswordFile is auth.bootstrap.adminPasswordFile.
	AdminPasswordFile string
	// SessionIdleTimeout and SessionLifetime default to 30m and 12h.
	SessionIdleTimeout, SessionLifetime time.Duration
	// SessionSecure is "auto" (default: secure when the request came over
	// TLS), "true" or "false".
	SessionSecure string
	// TokenMaxLifetime is the default expiry and cap of tokens; 0: none.
	TokenMaxLifetime time.Duration
	// RBACBindings are the rbac.bindings setting.
	RBACBindings []auth.Binding
	// InternalToken is the listeners.internal bearer token; the API accepts
	// it as the last step of the authenticator chain (a Node principal with
	// implicit viewer and auditor grants). Empty: not accepted.
	InternalToken string

	// AdminSocketPath is auth.adminSocket.path (the setting's default is
	// /run/service/service.sock); empty turns the socket off and
	// ServeAdminSocket returns at once. AdminSocketGroup is
	// auth.adminSocket.group: a gid admitted besides root and the server's
	// own uid, and the socket's group; -1: none. Map the setting explicitly:
	// the zero value 0 admits group root.
	AdminSocketPath  string
	AdminSocketGroup int

	// Env reads the environment (SERVICE_ENCRYPTION_KEY, SERVICE_ADMIN_PASSWORD,
	// SERVICE_BOOTSTRAP_TOKEN, ...); default os.Getenv.
	Env auth.Env
	// GenerateKey allows generating an encryption key into DataDir (file store).
	GenerateKey bool
	// Clock is injected by tests; default time.Now.
	Clock func() time.Time
	// Stdout receives the generated administrator password, printed once.
	Stdout interface{ Write([]byte) (int, error) }
	// WriteVisibleTimeout bounds how long a write waits for this node's
	// data plane to serve it (consistency.go); 0 takes the default 2s, a
	// negative value turns the wait off.
	WriteVisibleTimeout time.Duration
}

// SettingsService is the settings layer (internal/settings). Errors may
// implement ErrorKey() string (host_only, env_locked, invalid, ...).
type SettingsService interface {
	// Effective returns the effective settings with write-only keys removed.
	Effective(ctx context.Context) (map[string]any, error)
	// Schema returns the metadata of every key.
	Schema(ctx context.Context) (any, error)
	// PatchCluster applies a JSON merge patch of cluster-scope keys.
	PatchCluster(ctx context.Context, patch []byte) error
	// PatchNode applies a JSON merge patch of this node's node-scope keys.
	PatchNode(ctx context.Context, patch []byte) error
}

// DNSService is the narrow view of the data plane the API needs.
type DNSService interface {
	Query(ctx context.Context, req DNSQueryRequest) (DNSQueryResult, error)
	SetBlocking(ctx context.Context, req BlockingRequest) (BlockingState, error)
	FlushCache(ctx context.Context, name string) error
}

// MessageSource lists diagnosis messages of other subsystems.
type MessageSource interface {
	Messages(ctx context.Context) ([]DiagnosisMessage, error)
}

// BearerAuthenticator recognises bearer JWTs (OIDC, Kubernetes). claimed
// false passes the token on; claimed true with an error answers 401.
type BearerAuthenticator interface {
	AuthenticateBearer(ctx context.Context, token string) (p *auth.Principal, claimed bool, err error)
}

// Deps are the collaborators of the server.
type Deps struct {
	Store    store.Store
	Settings SettingsService // nil: settings routes answer not_implemented
	DNS      DNSService      // nil: DNS routes answer not_implemented
	Messages MessageSource   // optional
	Bearer   []BearerAuthenticator
	// OIDC holds the identity providers of auth.identityProviders (nil: none
	// configured); IdentityProvider objects are added from the store. The
	// set authenticates bearer ID tokens ahead of Bearer and serves the
	// browser login routes /auth/oidc/{idp}/start and /callback.
	OIDC *oidc.Set
	// Kinds describes the object kinds; nil builds internal/validation's.
	Kinds KindRegistry
	// Admitter, when set, validates every object of a multi-object apply
	// before any is stored (the store admits again when writing).
	Admitter store.Admitter
	Logger   *slog.Logger

	// Optional services of the data routes; nil answers not_implemented
	// (routes_querylog.go, routes_catalogue.go, routes_policies.go,
	// routes_blocklists.go, routes_cluster.go).
	QueryLog           QueryLog           // *querylog.Writer
	Catalogue          Catalogue          // adapter of dataplane/catalogue.Loader
	Policies           PolicyStates       // adapter of dataplane/policy Table.State
	BlockListRules     BlockListRules     // cached bodies + blocklist.NormalizeRules
	BlockListRefresher BlockListRefresher // immediate refetch of a list
	Blocking           BlockingReader     // nil: DNS if it implements BlockingReader
	Cluster            ClusterSource      // nil: /nodes lists this node only
	Doctor             DoctorSource       // nil: GET /doctor reports diagnoses only
	Notifier           ZoneNotifier       // nil: notify answers 202 queued false
	Forwarder          NodeForwarder      // nil: node= names only this node (nodeforward.go)
	// Visibility, when set, holds write answers until this node's data
	// plane serves them (consistency.go).
	Visibility Visibility
}

// KindRegistry lists the kinds the API serves (internal/validation).
type KindRegistry interface {
	Kinds() []validation.KindInfo
}

// Server is the REST API.
type Server struct {
	opts    Options
	deps    Deps
	log     *slog.Logger
	clock   func() time.Time
	api     huma.API
	handler http.Handler
	routes  []*routeInfo
	kinds   KindRegistry

	keys     auth.Keys
	hasher   *auth.Hasher
	sessions *auth.Sessions
	lockout  *auth.Lockout
	dir      *auth.Directory
	authz    *auth.Authorizer
	audit    *audit.Log
	limiter  *rateLimiter
	touched  *touchCache
	bindings *bindingCache
	// loginStates seals the OIDC login state cookie.
	loginStates *oidc.StateCodec

	// adminSelfUID is the uid admitted to the admin socket besides root
	// (os.Getuid; tests change it); adminGroups finds a peer's
	// supplementary groups.
	adminSelfUID int
	adminGroups  func(pid int32) []int

	// applyDecodes bounds the large POST /apply bodies decoded at once
	// (each up to maxBulkBody, ~25x that in maps while checked).
	applyDecodes chan struct{}

	// limits are the auth.* settings applied live (authlimits.go).
	limits *atomic.Pointer[AuthLimits]
}

func (o *Options) defaults() {
	if o.Address == "" {
		o.Address = "0.0.0.0:8080"
	}
	if o.TLSAuto == "" {
		o.TLSAuto = "selfsigned"
	}
	o.PathPrefix = strings.TrimRight(o.PathPrefix, "/")
	if o.PathPrefix != "" && !strings.HasPrefix(o.PathPrefix, "/") {
		o.PathPrefix = "/" + o.PathPrefix
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.NodeName == "" {
		o.NodeName, _ = os.Hostname()
	}
	if o.LocalLogin == "" {
		o.LocalLogin = LocalLoginEnabled
	}
	if o.SessionIdleTimeout <= 0 {
		o.SessionIdleTimeout = 30 * time.Minute
	}
	if o.SessionLifetime <= 0 {
		o.SessionLifetime = 12 * time.Hour
	}
	if o.SessionSecure == "" {
		o.SessionSecure = "auto"
	}
	if o.Env == nil {
		o.Env = os.Getenv
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.WriteVisibleTimeout == 0 {
		o.WriteVisibleTimeout = DefaultWriteVisibleTimeout
	}
}

// New builds the server: keys, audit log, first-boot administrator,
// bootstrap token and the route registry.
func New(ctx context.Context, opts Options, deps Deps) (*Server, error) {
	opts.defaults()
	switch opts.LocalLogin {
	case LocalLoginEnabled, LocalLoginAdminsOnly, LocalLoginDisabled:
	default:
		return nil, fmt.Errorf("auth.localLogin: %q is not enabled, admins-only or disabled", opts.LocalLogin)
	}
	if deps.Store == nil {
		return nil, errors.New("api: a store is required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	if deps.Visibility != nil {
		// Writes are noted on their request so its answer can wait for them.
		deps.Store = visibleStore{deps.Store}
		if deps.Settings != nil {
			deps.Settings = visibleSettings{deps.Settings}
		}
	}
	if opts.DataDir == "" {
		return nil, errors.New("api: a data directory is required")
	}
	for _, b := range opts.RBACBindings {
		if err := auth.ValidateBinding(b); err != nil {
			return nil, fmt.Errorf("rbac.bindings: %s: %w", b.Name, err)
		}
	}
	keys, err := auth.LoadKeys(opts.Env, opts.DataDir, opts.GenerateKey)
	if err != nil {
		return nil, fmt.Errorf("encryption key: %w", err)
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	al, err := audit.Open(ctx, opts.DataDir+"/audit.db", opts.Clock)
	if err != nil {
		return nil, err
	}
	s := &Server{
		opts: opts, deps: deps, log: deps.Logger, clock: opts.Clock, applyDecodes: make(chan struct{}, maxLargeApplies),
		keys: keys, hasher: auth.NewHasher(2),
		sessions: auth.NewSessions(keys, opts.Clock), lockout: auth.NewLockout(opts.Clock),
		dir: auth.NewDirectory(deps.Store, opts.Namespace), audit: al,
		limiter: newRateLimiter(opts.Clock, 30, time.Minute), touched: newTouchCache(),
		adminSelfUID: os.Getuid(), adminGroups: procGroups,
	}
	s.limits = new(atomic.Pointer[AuthLimits])
	s.SetAuthLimits(AuthLimits{SessionIdleTimeout: opts.SessionIdleTimeout, SessionLifetime: opts.SessionLifetime,
		SessionSecure: opts.SessionSecure, TokenMaxLifetime: opts.TokenMaxLifetime})
	if err := s.sessions.Persist(ctx, filepath.Join(opts.DataDir, "sessions.db")); err != nil {
		al.Close()
		return nil, err
	}
	s.kinds = deps.Kinds
	if s.kinds == nil {
		v, err := validation.New()
		if err != nil {
			al.Close()
			s.sessions.Close()
			return nil, fmt.Errorf("kinds: %w", err)
		}
		s.kinds = v
		if deps.Admitter == nil {
			s.deps.Admitter = v
		}
	}
	s.bindings = &bindingCache{s: s}
	s.authz = auth.NewAuthorizer(s.bindings.get)
	if err := s.setupOIDC(); err != nil {
		al.Close()
		s.sessions.Close()
		return nil, err
	}
	if err := s.bootstrap(ctx); err != nil {
		al.Close()
		s.sessions.Close()
		return nil, err
	}
	s.buildAPI()
	return s, nil
}

func (s *Server) bootstrap(ctx context.Context) error {
	res, err := auth.EnsureAdmin(ctx, s.dir, s.hasher, s.opts.Env, s.opts.AdminPasswordFile, s.opts.NodeName, s.clock())
	if err != nil {
		return err
	}
	if res.GeneratedPassword != "" {
		// Printed once to stdout, never to the log.
		fmt.Fprintf(s.opts.Stdout, "Generated password for user %q: %s\nIt must be changed at first login.\n", auth.AdminUsername, res.GeneratedPassword)
	}
	if res.Lost {
		s.log.Info("administrator account was created by another replica")
	}
	if err := auth.InstallBootstrapToken(ctx, s.dir, s.opts.Env, s.clock()); err != nil {
		return err
	}
	return nil
}

// Close releases the audit log and the session revocation file.
func (s *Server) Close() error {
	return errors.Join(s.audit.Close(), s.sessions.Close())
}

// API returns the huma API (for the OpenAPI document).
func (s *Server) API() huma.API { return s.api }

// Handler serves the whole API, including its path prefix.
func (s *Server) Handler() http.Handler { return s.handler }

// BasePath is where the API is mounted.
func (s *Server) BasePath() string { return s.opts.PathPrefix + "/api/v1" }

func (s *Server) buildAPI() {
	installHumaErrors()
	inner := http.NewServeMux()
	cfg := huma.DefaultConfig("service API", version.Version)
	cfg.Info.Description = "REST API of the DNS filtering and authoritative server."
	cfg.Servers = []*huma.Server{{URL: s.BasePath()}}
	cfg.OpenAPIPath = ""
	cfg.DocsPath = ""
	cfg.SchemasPath = ""
	cfg.CreateHooks = nil
	cfg.Transformers = append(cfg.Transformers, func(ctx huma.Context, status string, v any) (any, error) {
		if t, ok := v.(tookSetter); ok {
			t.setTook(tookMS(ctx.Context()))
		}
		if e, ok := v.(*Error); ok {
			noteAnswer(ctx.Context(), e)
		}
		return v, nil
	})
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		"bearer": {Type: "http", Scheme: "bearer", Description: "API token svc_<id>_<secret>"},
		"cookie": {Type: "apiKey", In: "cookie", Name: auth.CookieBaseName},
	}
	s.api = humago.New(inner, cfg)
	s.api.UseMiddleware(s.authorize, s.forwardNode)
	s.registerRoutes()
	s.registerDocs(inner)

	apiHandler := http.Handler(inner)
	apiHandler = s.notFoundGuard(inner)
	base := s.BasePath()
	outer := http.NewServeMux()
	outer.Handle(base+"/", http.StripPrefix(base, apiHandler))
	// The dashboard (internal/dashboard) answers its own routes and files.
	dash, err := dashboard.New(s.opts.PathPrefix)
	if err != nil {
		s.log.Error("dashboard not served", "error", err)
	}
	outer.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if dash != nil && dash.Serve(w, r) {
			return
		}
		writeError(w, r, newErr(http.StatusNotFound, KeyNotFound, "no route "+r.URL.Path, "the API is under "+base))
	})
	s.handler = s.middleware(outer)
}

// notFoundGuard answers unknown routes and wrong methods with the error body
// instead of ServeMux's plain text.
func (s *Server) notFoundGuard(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			rec := &statusOnly{header: http.Header{}}
			h, _ := mux.Handler(r)
			h.ServeHTTP(rec, r)
			if rec.code == http.StatusMethodNotAllowed {
				w.Header().Set("Allow", rec.header.Get("Allow"))
				writeError(w, r, newErr(http.StatusMethodNotAllowed, KeyInvalid, "method "+r.Method+" not allowed on "+r.URL.Path, "allowed: "+rec.header.Get("Allow")))
				return
			}
			writeError(w, r, newErr(http.StatusNotFound, KeyNotFound, "no route "+r.URL.Path, ""))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header         { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusOnly) WriteHeader(c int)           { s.code = c }

// Serve listens on opts.Address until ctx ends, with TLS unless TLSAuto is
// off and no certificate is configured.
func (s *Server) Serve(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("api listener: %w", err)
	}
	return s.ServeListener(ctx, ln)
}

// ServeListener serves on ln (tests pass a 127.0.0.1:0 listener).
func (s *Server) ServeListener(ctx context.Context, ln net.Listener) error {
	tlsCfg, err := s.tlsConfig()
	if err != nil {
		ln.Close()
		return err
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      120 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("api listener: %w", err)
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
		<-errc
		return nil
	}
}
