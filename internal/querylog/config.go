// Package querylog records one row per DNS query of a node into
// <dataDir>/querylog.db (or the process log), keeps rolled-up statistics,
// answers the query-log and statistics routes and streams new rows as
// Server-Sent Events. It does not import the data plane: the adapter in
// internal/dnslog turns dataplane.QueryRecord values into Rows.
package querylog

import (
	"fmt"
	"time"
)

// Sinks.
const (
	SinkSQLite = "sqlite"
	SinkSlog   = "slog"
)

// Privacy modes (querylog.privacy).
const (
	PrivacyFull               = "full"
	PrivacyAnonymizeClient    = "anonymize_client"
	PrivacyHideDomains        = "hide_domains"
	PrivacyHideDomainsClients = "hide_domains_clients"
	PrivacyNothing            = "nothing"
)

// Anonymisation methods (querylog.anonymize).
const (
	AnonymizePrefix    = "prefix"
	AnonymizePseudonym = "pseudonym"
)

// Config is the query log's view of the settings. The lead maps
// querylog.* and node.dataDir/node.name onto it.
type Config struct {
	Enabled   bool
	Sink      string // sqlite (default) or slog
	Privacy   string // full (default), anonymize_client, hide_domains, hide_domains_clients, nothing
	Anonymize string // prefix (default) or pseudonym
	// PseudonymKey keys the HMAC of the pseudonym mode. Empty: a random key
	// generated once and kept in querylog.db (stable per node). Pass a
	// cluster-wide secret for pseudonyms that agree across nodes.
	PseudonymKey []byte
	// RetentionRaw is querylog.retention.raw; 0 keeps raw rows until the size cap.
	RetentionRaw time.Duration
	// MaxDBBytes is querylog.retention.maxDBBytes; 0 removes the cap.
	MaxDBBytes     int64
	ExcludeDomains []string // exact, *.suffix or /regex/
	ExcludeClients []string // IP, CIDR or client name
	ExcludeSUDN    bool     // special-use domain names, see docs/querylog.md
	DataDir        string   // querylog.db lives here
	Node           string   // node name, reported in answers
}

// DefaultConfig returns the defaults of the settings registry.
func DefaultConfig() Config {
	return Config{
		Enabled: true, Sink: SinkSQLite, Privacy: PrivacyFull, Anonymize: AnonymizePrefix,
		RetentionRaw: 720 * time.Hour, MaxDBBytes: 10 << 30, ExcludeSUDN: true,
	}
}

func (c *Config) normalize() error {
	if c.Sink == "" {
		c.Sink = SinkSQLite
	}
	if c.Privacy == "" {
		c.Privacy = PrivacyFull
	}
	if c.Anonymize == "" {
		c.Anonymize = AnonymizePrefix
	}
	switch c.Sink {
	case SinkSQLite, SinkSlog:
	default:
		return fmt.Errorf("querylog: unknown sink %q", c.Sink)
	}
	switch c.Privacy {
	case PrivacyFull, PrivacyAnonymizeClient, PrivacyHideDomains, PrivacyHideDomainsClients, PrivacyNothing:
	default:
		return fmt.Errorf("querylog: unknown privacy mode %q", c.Privacy)
	}
	switch c.Anonymize {
	case AnonymizePrefix, AnonymizePseudonym:
	default:
		return fmt.Errorf("querylog: unknown anonymize method %q", c.Anonymize)
	}
	if c.RetentionRaw < 0 || c.MaxDBBytes < 0 {
		return fmt.Errorf("querylog: negative retention")
	}
	return nil
}

// Status classes: every status of the data plane falls in one.
const (
	ClassAllowed   = "allowed"   // answered, cached, stale, authoritative, local, control
	ClassBlocked   = "blocked"   // blocked
	ClassRewritten = "rewritten" // rewritten
	ClassError     = "error"     // failed, refused, malformed, dropped
)

// StatusClass maps a status name to its class.
func StatusClass(status string) string {
	switch status {
	case "blocked":
		return ClassBlocked
	case "rewritten":
		return ClassRewritten
	case "failed", "refused", "malformed", "dropped":
		return ClassError
	default:
		return ClassAllowed
	}
}

// statusesOfClass lists the statuses of a class (for filtering).
func statusesOfClass(class string) ([]string, bool) {
	switch class {
	case ClassAllowed:
		return []string{"answered", "cached", "stale", "authoritative", "local", "control"}, true
	case ClassBlocked:
		return []string{"blocked"}, true
	case ClassRewritten:
		return []string{"rewritten"}, true
	case ClassError:
		return []string{"failed", "refused", "malformed", "dropped"}, true
	}
	return nil, false
}

// Row is one logged query. Strings are owned by the row.
type Row struct {
	ID         int64 // assigned by the Writer; event id of the stream
	Time       time.Time
	Node       string
	Client     string // IP address (after privacy: prefix, pseudonym or empty)
	ClientName string
	ClientID   string // self-declared by a DoT/DoH/DoQ client (SNI label, DoH path), "" for none
	Group      string // the client's first group (clients list only, not stored per row)
	Domain     string // lower case, no trailing dot ("." for the root)
	QType      string // e.g. "A"
	Rcode      string // e.g. "NOERROR"
	Status     string // answered, cached, stale, blocked, ...
	Reason     string
	List       string
	Rule       string
	Policy     string
	Upstream   string
	Zone       string
	Transport  string
	Duration   time.Duration
}
