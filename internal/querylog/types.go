package querylog

import "time"

// QueryItem is one row of the query log as the API returns it, and the
// payload of a stream event.
type QueryItem struct {
	ID          int64     `json:"id"`
	TS          time.Time `json:"ts"`
	Node        string    `json:"node"`
	Client      string    `json:"client"`
	ClientName  string    `json:"client_name,omitempty"`
	ClientID    string    `json:"client_id,omitempty" doc:"the client ID the client declared over DoT, DoH or DoQ (or the edge passed on)"`
	Domain      string    `json:"domain"`
	Type        string    `json:"type"`
	Rcode       string    `json:"rcode"`
	Status      string    `json:"status"`
	StatusClass string    `json:"status_class"`
	Reason      string    `json:"reason,omitempty"`
	List        string    `json:"list,omitempty"`
	Rule        string    `json:"rule,omitempty"`
	Policy      string    `json:"policy,omitempty"`
	Upstream    string    `json:"upstream,omitempty"`
	Zone        string    `json:"zone,omitempty"`
	Transport   string    `json:"transport,omitempty"`
	LatencyMS   float64   `json:"latency_ms"`
}

// QueryPage is a page of the query log, newest first.
type QueryPage struct {
	Items    []QueryItem `json:"items"`
	Node     string      `json:"node"`
	TookMS   float64     `json:"took_ms"`
	Continue string      `json:"continue,omitempty"`
	// NewestID is the newest row id of the whole log (any filter) when the
	// page was read: a live tail started after max(NewestID, the page's
	// newest id) misses no row and repeats none, even when the page is
	// empty.
	NewestID int64 `json:"newest_id"`
}

// BlockedItem is a blocked query (spec shape BlockedItem).
type BlockedItem struct {
	ID         int64     `json:"id" minimum:"0"`
	TS         time.Time `json:"ts"`
	Domain     string    `json:"domain"`
	Client     string    `json:"client"`
	Status     string    `json:"status"`
	ClientName string    `json:"client_name,omitempty"`
	List       string    `json:"list,omitempty"`
}

// BlockedPage is a page of blocked queries, newest first.
type BlockedPage struct {
	Items    []BlockedItem `json:"items"`
	Node     string        `json:"node"`
	TookMS   float64       `json:"took_ms"`
	Continue string        `json:"continue,omitempty"`
}

// ClientItem is a client with its counts in a window (spec shape ClientItem).
type ClientItem struct {
	Key      string     `json:"key"`
	Count    int64      `json:"count"`
	Blocked  int64      `json:"blocked"`
	Group    string     `json:"group,omitempty"`
	LastSeen *time.Time `json:"last_seen,omitempty"`
	Name     string     `json:"name,omitempty"`
}

// ClientsPage lists clients by count, highest first.
type ClientsPage struct {
	Items       []ClientItem `json:"items"`
	Approximate bool         `json:"approximate"`
	Node        string       `json:"node"`
	TookMS      float64      `json:"took_ms"`
}

// ClientKey names a series of a ClientTimeseriesBody.
type ClientKey struct {
	Key  string `json:"key"`
	Name string `json:"name,omitempty"`
}

// ClientPoint is one step: Counts[i] belongs to Clients[i]; nil when the
// step has no data at all.
type ClientPoint struct {
	TS     time.Time `json:"ts"`
	Counts []int64   `json:"counts"`
}

// ClientTimeseriesBody is queries per client per step (spec shape).
type ClientTimeseriesBody struct {
	Step        string        `json:"step"` // Go duration, e.g. "1h0m0s"
	Clients     []ClientKey   `json:"clients"`
	Points      []ClientPoint `json:"points"`
	Approximate bool          `json:"approximate"`
	Scope       string        `json:"scope"` // "node"
	Nodes       []string      `json:"nodes"`
	Partial     bool          `json:"partial"`
	From        time.Time     `json:"from"`
	Until       time.Time     `json:"until"`
	TookMS      float64       `json:"took_ms"`
}

// Summary is `stats summary`.
type Summary struct {
	Window       string           `json:"window"`
	From         time.Time        `json:"from"`
	Until        time.Time        `json:"until"`
	Total        int64            `json:"total"`
	Blocked      int64            `json:"blocked"`
	BlockedShare float64          `json:"blocked_share"` // 0..1
	AvgLatencyMS float64          `json:"avg_latency_ms"`
	ByStatus     map[string]int64 `json:"by_status"`
	ByClass      map[string]int64 `json:"by_status_class"`
	// Series is the window in buckets of the request's step (only when a
	// step was asked for).
	Series []SeriesPoint `json:"series,omitempty" doc:"queries and blocked per bucket of step, oldest first (only with step)"`
	Node   string        `json:"node"`
	TookMS float64       `json:"took_ms"`
}

// TopItem is one row of `stats top`.
type TopItem struct {
	Key     string `json:"key"`
	Count   int64  `json:"count"`
	Blocked int64  `json:"blocked"`
	// Answer times of the queries forwarded to an upstream (dimension
	// upstreams only; cached answers are not counted).
	AvgLatencyMS float64 `json:"avg_latency_ms,omitempty" doc:"upstreams: average answer time of forwarded queries, ms"`
	P95LatencyMS float64 `json:"p95_latency_ms,omitempty" doc:"upstreams: 95th percentile answer time of forwarded queries, ms (from a histogram, within about 15%)"`
}

// TopBody is `stats top`.
type TopBody struct {
	Dim         string    `json:"dim"`
	Window      string    `json:"window"`
	Blocked     bool      `json:"blocked"`
	Items       []TopItem `json:"items"`
	Approximate bool      `json:"approximate"`
	From        time.Time `json:"from"`
	Until       time.Time `json:"until"`
	Node        string    `json:"node"`
	TookMS      float64   `json:"took_ms"`
}

// Item converts a row to its API form.
func (r *Row) Item() QueryItem {
	return QueryItem{
		ID: r.ID, TS: r.Time.UTC(), Node: r.Node, Client: r.Client, ClientName: r.ClientName, ClientID: r.ClientID,
		Domain: r.Domain, Type: r.QType, Rcode: r.Rcode, Status: r.Status, StatusClass: StatusClass(r.Status), Reason: r.Reason,
		List: r.List, Rule: r.Rule, Policy: r.Policy, Upstream: r.Upstream, Zone: r.Zone, Transport: r.Transport,
		LatencyMS: float64(r.Duration.Microseconds()) / 1000,
	}
}
