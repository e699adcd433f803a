package settings

import (
	"net/netip"
	"time"
)

// Config is the effective configuration of one node, already parsed and
// validated. A *Config handed out by the Manager is never changed afterwards;
// a change produces a new one.
type Config struct {
	Node            Node
	Listeners       Listeners
	Store           Store
	Upstreams       Upstreams
	Cache           Cache
	Blocking        Blocking
	BlockPage       BlockPage
	UnblockRequests UnblockRequests
	Querylog        Querylog
	Ratelimit       Ratelimit
	// Objects are inline manifests from the config file, kept raw for the
	// store layer to apply (manager file:<config path>).
	Objects      []map[string]any
	SettingsFile string
	ObjectsDir   string
	TSIGKeys     []TSIGKey
	Notify       Notify
	ExternalDNS  ExternalDNS
	Publish      Publish
	Auth         Auth
	RBAC         RBAC
}

type Node struct {
	Name     string // empty: the host name
	Lameduck time.Duration
	DataDir  string
}

type Listeners struct {
	DNS                     []DNSListener
	DoT                     []TLSListener
	DoQ                     []TLSListener
	DoH                     []HTTPSListener
	DoH3                    []HTTPSListener
	DoHServer               string // lean or stdlib (net/http)
	API                     APIListener
	Ops                     AddrListener
	Metrics                 AddrListener
	ProxyProtocolFrom       []netip.Prefix
	ProxyProtocolSecretFile string
	ECSClientFrom           []netip.Prefix // forwarders whose ECS option names the client
	Internal                InternalListener
	BlockPage               BlockPageListener
	Sockets                 int // 0: one per CPU
}

// DNSListener is one plain DNS listener; Protocols holds "udp" and/or "tcp".
type DNSListener struct {
	Address   string
	Protocols []string
}

type TLSFiles struct {
	CertFile string
	KeyFile  string
}

type TLSListener struct {
	Address string
	TLS     TLSFiles
}

type HTTPSListener struct {
	Address string
	TLS     TLSFiles
	Path    string // default /dns-query
}

type APIListener struct {
	Address        string
	TLS            APITLS
	PathPrefix     string
	TrustedProxies []netip.Prefix
	// WriteVisibleTimeout bounds the wait of a write for this node's DNS
	// answers to include it (0: no wait).
	WriteVisibleTimeout time.Duration
}

type APITLS struct {
	Auto     string // selfsigned or off; CertFile takes precedence
	CertFile string
	KeyFile  string
}

type AddrListener struct {
	Address string
}

type InternalListener struct {
	Address   string
	TokenFile string
	TLS       InternalTLS
}

type InternalTLS struct {
	CertFile   string
	KeyFile    string
	CAFile     string
	ServerName string
}

type BlockPageListener struct {
	HTTP  string // empty: off
	HTTPS string // empty: off
	TLS   TLSFiles
}

type Store struct {
	Driver string // sqlite or kube
	Kube   KubeStore
}

type KubeStore struct {
	StartupTimeout time.Duration
	SnapshotMaxAge time.Duration
	// SettingsConfigMap holds the shared cluster-scope settings.
	SettingsConfigMap string
}

type Upstreams struct {
	// Groups always holds "default" (the built-in one unless overridden).
	Groups    map[string]UpstreamGroup
	Bootstrap []string
	// Conditional maps a lower-case, dot-terminated suffix to a group name.
	Conditional map[string]string
	ECS         ECS
}

type UpstreamGroup struct {
	Servers  []string
	Strategy string // parallel_best, strict, random, rtt_weighted
	Timeout  time.Duration
}

type ECS struct {
	Mode       string // strip, forward, add
	IPv4Prefix int
	IPv6Prefix int
}

type Cache struct {
	MaxEntries  int // 0: cache off
	MinTTL      time.Duration
	MaxTTL      time.Duration // 0: no limit
	NegativeTTL time.Duration
	Prefetch    Prefetch
	ServeStale  ServeStale
}

type Prefetch struct {
	Threshold int // 0: off
	Window    time.Duration
}

type ServeStale struct {
	TTL       time.Duration // 0: off
	AnswerTTL time.Duration // 0 in the file reads as 30s here
	MaxWait   time.Duration // 0 in the file reads as 1800ms here
}

type Blocking struct {
	Enabled            bool
	DefaultResponse    string
	BlockTTL           time.Duration
	AllowDegraded      bool
	CustomIP           CustomIP
	RefreshInterval    time.Duration
	InitStrategy       string
	ListsDir           string // empty in the file reads as <dataDir>/lists here
	AllowLocalListURLs bool
	Catalogue          Catalogue
	// GlobalPolicyNamespaces may hold policies for every client; empty
	// means the service's own namespace (resolved by the node).
	GlobalPolicyNamespaces []string
}

type CustomIP struct {
	V4 netip.Addr // invalid (zero) when unset: answer NODATA
	V6 netip.Addr
}

type Catalogue struct {
	URL                 string
	ImportedServicesURL string
	RefreshInterval     time.Duration
}

type BlockPage struct {
	Enabled      bool
	IPv4         netip.Addr
	IPv6         netip.Addr
	Title        string
	Message      string
	Contact      string
	ShowDetails  bool
	DashboardURL string
	RateLimit    int // per minute per client; 0: no limit
}

type UnblockRequests struct {
	Enabled       bool
	RateLimit     int
	MaxPending    int
	PendingExpiry time.Duration
	Retention     time.Duration
}

type Querylog struct {
	Enabled   bool
	Sink      string
	Privacy   string
	Anonymize string
	Retention QuerylogRetention
	Exclude   QuerylogExclude
}

type QuerylogRetention struct {
	Raw        time.Duration
	MaxDBBytes int64
}

type QuerylogExclude struct {
	Domains []string
	Clients []string
	SUDN    bool
}

type Ratelimit struct {
	Enabled bool
	// IPv4 and IPv6 map a prefix length to queries per minute, merged with
	// the defaults; levels set to 0 are left out.
	IPv4       map[int]int
	IPv6       map[int]int
	Slip       int
	MaxBuckets int // 0 in the file reads as 65536 here
	Exempt     []netip.Prefix
}

// TSIGKey names a shared secret; the secret itself stays in SecretFile.
type TSIGKey struct {
	Name       string
	Algorithm  string // hmac-sha256 or hmac-sha512
	SecretFile string
}

type Auth struct {
	LocalLogin        string // enabled, admins-only, disabled
	Bootstrap         AuthBootstrap
	Session           Session
	Tokens            Tokens
	IdentityProviders []map[string]any // decoded strictly by the auth package
	Kubernetes        AuthKubernetes
	AdminSocket       AdminSocket
}

type AuthBootstrap struct {
	AdminPasswordFile string
}

type Session struct {
	IdleTimeout time.Duration
	Lifetime    time.Duration
	Secure      string // auto, true or false
}

type Tokens struct {
	MaxLifetime time.Duration // 0: tokens may never expire
}

type AuthKubernetes struct {
	Mode string
}

type AdminSocket struct {
	Path  string
	Group int // -1: none
}

type RBAC struct {
	Bindings []map[string]any // RoleBinding specs, decoded strictly by the auth package
}
