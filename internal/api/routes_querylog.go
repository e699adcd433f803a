package api

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/svcdns/svc/internal/querylog"
)

// QueryLog is the query log of this node; *querylog.Writer implements it.
type QueryLog interface {
	List(ctx context.Context, f querylog.Filter) (*querylog.QueryPage, error)
	Blocked(ctx context.Context, f querylog.Filter) (*querylog.BlockedPage, error)
	Clients(ctx context.Context, req querylog.ClientsRequest) (*querylog.ClientsPage, error)
	ClientTimeseries(ctx context.Context, req querylog.TimeseriesRequest) (*querylog.ClientTimeseriesBody, error)
	Summary(ctx context.Context, window time.Duration) (*querylog.Summary, error)
	Series(ctx context.Context, window, step time.Duration) ([]querylog.SeriesPoint, error)
	Top(ctx context.Context, req querylog.TopRequest) (*querylog.TopBody, error)
	StreamHandler(opts querylog.StreamOptions) http.Handler
}

// QueryPage is one page of the query log, newest first.
type QueryPage struct {
	Items    []querylog.QueryItem `json:"items"`
	Continue string               `json:"continue" doc:"opaque token of the next page; empty on the last page"`
	Node     string               `json:"node"`
	TookMS   float64              `json:"took_ms"`
	NewestID int64                `json:"newest_id" doc:"newest row id of the whole log when the page was read; GET /queries/stream with last_event_id set to the larger of this and the page's first id continues the page without a gap, even when the page is empty"`
}

func (p *QueryPage) setTook(ms float64) { p.TookMS = ms }

// BlockedPage is one page of blocked queries, newest first.
type BlockedPage struct {
	Items    []querylog.BlockedItem `json:"items"`
	Continue string                 `json:"continue"`
	Node     string                 `json:"node"`
	TookMS   float64                `json:"took_ms"`
}

func (p *BlockedPage) setTook(ms float64) { p.TookMS = ms }

// ClientsPage lists the clients of a window, busiest first.
type ClientsPage struct {
	Items       []querylog.ClientItem `json:"items"`
	Continue    string                `json:"continue"`
	Approximate bool                  `json:"approximate" doc:"per-hour counts were capped"`
	Node        string                `json:"node"`
	TookMS      float64               `json:"took_ms"`
}

func (p *ClientsPage) setTook(ms float64) { p.TookMS = ms }

// QueryFilterParams are the filters of the query-log routes
// (querylog.ParseFilter reads them from the raw query; these fields
// document them).
type QueryFilterParams struct {
	Client      string `query:"client" maxLength:"255" doc:"client key (address, prefix or pseudonym)"`
	ClientID    string `query:"client_id" maxLength:"255" doc:"client ID the client declared over DoT, DoH or DoQ (exact)"`
	Domain      string `query:"domain" maxLength:"255" doc:"queried name"`
	DomainMatch string `query:"domain_match" enum:"exact,substring" doc:"how domain matches (default exact)"`
	List        string `query:"list" maxLength:"512" doc:"list that decided, e.g. ns/name or service:<id>"`
	QType       string `query:"qtype" maxLength:"16"`
	Status      string `query:"status" maxLength:"32" doc:"answered, cached, stale, blocked, rewritten, authoritative, local, control, failed, refused, malformed, dropped"`
	StatusClass string `query:"status_class" enum:"allowed,blocked,rewritten,error"`
	Upstream    string `query:"upstream" maxLength:"512"`
	Zone        string `query:"zone" maxLength:"255"`
	Policy      string `query:"policy" maxLength:"512" doc:"policy that decided (namespace/name)"`
	Since       string `query:"since" maxLength:"64" doc:"RFC 3339 time, inclusive"`
	Until       string `query:"until" maxLength:"64" doc:"RFC 3339 time, exclusive"`
	Limit       int    `query:"limit" minimum:"0" maximum:"1000" doc:"page size, default 50"`
	Continue    string `query:"continue" maxLength:"64"`

	filter querylog.Filter
}

// Resolve parses the raw query with querylog.ParseFilter, so that the API
// and the stream agree on every filter.
func (p *QueryFilterParams) Resolve(ctx huma.Context) []error {
	u := ctx.URL()
	f, err := querylog.ParseFilter(u.Query())
	if err != nil {
		return []error{&huma.ErrorDetail{Location: "query", Message: strings.TrimPrefix(err.Error(), querylog.ErrInvalid.Error()+": ")}}
	}
	p.filter = f
	return nil
}

type queriesIn struct {
	QueryFilterParams
	NodeParam
}

type queriesOut struct{ Body *QueryPage }
type blockedOut struct{ Body *BlockedPage }

type clientsIn struct {
	NodeParam
	Window string `query:"window" maxLength:"16" default:"24h" doc:"duration back from now, e.g. 24h or 7d"`
	Limit  int    `query:"limit" minimum:"0" maximum:"1000" doc:"default 100"`
}

type clientsOut struct{ Body *ClientsPage }

type timeseriesIn struct {
	NodeParam
	From    time.Time `query:"from" doc:"RFC 3339; default until minus 24h"`
	Until   time.Time `query:"until" doc:"RFC 3339; default now"`
	Step    string    `query:"step" maxLength:"16" doc:"bucket width, at least 1m, at most 1000 points; default 1h"`
	Clients []string  `query:"clients" maxItems:"100" doc:"client keys; empty: the busiest"`
	Top     int       `query:"top" minimum:"0" maximum:"100" doc:"busiest clients when none are named; default 5"`
}

type timeseriesOut struct {
	Body *querylog.ClientTimeseriesBody
}

type summaryIn struct {
	NodeParam
	Window string `query:"window" maxLength:"16" default:"24h" doc:"duration back from now, e.g. 24h or 7d"`
	Step   string `query:"step" maxLength:"16" doc:"also the queries and blocked over time in buckets of this width (whole minutes, at most 1000 buckets), from the rollups"`
}

type summaryOut struct{ Body *querylog.Summary }

type topIn struct {
	NodeParam
	Dim     string `query:"dim" enum:"domains,clients,upstreams,lists,zones" default:"domains"`
	Top     int    `query:"top" minimum:"1" maximum:"100" default:"10" doc:"rows"`
	Blocked bool   `query:"blocked" doc:"rank by blocked count; only names with blocks"`
	Window  string `query:"window" maxLength:"16" default:"24h" doc:"duration back from now, e.g. 24h or 7d"`
}

type topOut struct{ Body *querylog.TopBody }

type streamIn struct {
	QueryFilterParams
	NodeParam
	LastEventID  string `header:"Last-Event-ID" maxLength:"20" doc:"resume after this event id"`
	LastEventIDQ string `query:"last_event_id" maxLength:"20" doc:"resume after this event id on a first connect (the header wins)"`
}

// maxWindow bounds statistics windows (per-hour rollups are kept 400 days).
const maxWindow = 400 * 24 * time.Hour

// parseWindow reads a duration with an optional day suffix ("7d").
func parseWindow(v string) (time.Duration, *Error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 24 * time.Hour, nil
	}
	var d time.Duration
	if n, ok := strings.CutSuffix(v, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 1 {
			return 0, errInvalid("window: want a duration such as 24h or 7d")
		}
		d = time.Duration(days) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			return 0, errInvalid("window: want a duration such as 24h or 7d")
		}
	}
	if d < time.Minute || d > maxWindow {
		return 0, errInvalid("window: 1m to 400d")
	}
	return d, nil
}

// queryLogErr maps the query log's errors.
func queryLogErr(err error) error {
	switch {
	case errors.Is(err, querylog.ErrInvalid):
		return errInvalid("%s", strings.TrimPrefix(err.Error(), querylog.ErrInvalid.Error()+": "))
	case errors.Is(err, querylog.ErrNoStore):
		return newErr(http.StatusNotImplemented, KeyNotImplemented, "the query log is not stored on this node", "set querylog.sink to sqlite and querylog.enabled to true")
	}
	return fromError(err)
}

func (s *Server) queryLog() (QueryLog, error) {
	if s.deps.QueryLog == nil {
		return nil, errNotImplemented("the query log")
	}
	return s.deps.QueryLog, nil
}

func (s *Server) registerQueryLogRoutes() {
	tags := []string{"querylog"}
	perm := clusterPerm("querylogs.read")
	register(s, huma.Operation{OperationID: "queries", Method: http.MethodGet, Path: "/queries", Summary: "Query log of this node, newest first", Tags: tags,
		Description: "Keyset pages by `continue`. A filter without an indexed equality (client, exact domain, status, status_class) examines a bounded number of rows per page, so a page may hold fewer than `limit` rows and still carry `continue`."},
		perm, func(ctx context.Context, in *queriesIn) (*queriesOut, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			p, err := ql.List(ctx, in.filter)
			if err != nil {
				return nil, queryLogErr(err)
			}
			out := &QueryPage{Items: p.Items, Continue: p.Continue, Node: p.Node, NewestID: p.NewestID}
			if out.Items == nil {
				out.Items = []querylog.QueryItem{}
			}
			return &queriesOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "queries-blocked", Method: http.MethodGet, Path: "/queries/blocked", Summary: "Blocked queries of this node, newest first", Tags: tags,
		Description: "The query-log filters apply; status is always blocked."},
		perm, func(ctx context.Context, in *queriesIn) (*blockedOut, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			p, err := ql.Blocked(ctx, in.filter)
			if err != nil {
				return nil, queryLogErr(err)
			}
			out := &BlockedPage{Items: p.Items, Continue: p.Continue, Node: p.Node}
			if out.Items == nil {
				out.Items = []querylog.BlockedItem{}
			}
			return &blockedOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "queries-clients", Method: http.MethodGet, Path: "/queries/clients", Summary: "Clients of a window with counts, busiest first", Tags: tags},
		perm, func(ctx context.Context, in *clientsIn) (*clientsOut, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			w, e := parseWindow(in.Window)
			if e != nil {
				return nil, e
			}
			p, err := ql.Clients(ctx, querylog.ClientsRequest{Window: w, Limit: in.Limit})
			if err != nil {
				return nil, queryLogErr(err)
			}
			out := &ClientsPage{Items: p.Items, Approximate: p.Approximate, Node: p.Node}
			if out.Items == nil {
				out.Items = []querylog.ClientItem{}
			}
			return &clientsOut{Body: out}, nil
		})
	register(s, huma.Operation{OperationID: "queries-clients-timeseries", Method: http.MethodGet, Path: "/queries/clients/timeseries", Summary: "Queries per client per step", Tags: tags,
		Description: "Counted from the raw rows of this node (scope node); `partial` when raw retention no longer covers `from`."},
		perm, func(ctx context.Context, in *timeseriesIn) (*timeseriesOut, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			var step time.Duration
			if in.Step != "" {
				if step, err = time.ParseDuration(in.Step); err != nil {
					return nil, errInvalid("step: want a duration such as 5m or 1h")
				}
			}
			var clients []string
			for _, c := range in.Clients {
				if c = strings.TrimSpace(c); c != "" {
					clients = append(clients, c)
				}
			}
			b, err := ql.ClientTimeseries(ctx, querylog.TimeseriesRequest{From: in.From, Until: in.Until, Step: step, Clients: clients, Top: in.Top})
			if err != nil {
				return nil, queryLogErr(err)
			}
			return &timeseriesOut{Body: b}, nil
		})
	register(s, huma.Operation{OperationID: "stats-summary", Method: http.MethodGet, Path: "/stats/summary", Summary: "Totals of a window by status and class", Tags: tags},
		perm, func(ctx context.Context, in *summaryIn) (*summaryOut, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			w, e := parseWindow(in.Window)
			if e != nil {
				return nil, e
			}
			sum, err := ql.Summary(ctx, w)
			if err != nil {
				return nil, queryLogErr(err)
			}
			if in.Step != "" {
				step, perr := time.ParseDuration(strings.TrimSpace(in.Step))
				if perr != nil {
					return nil, errInvalid("step: want a duration such as 15m or 1h")
				}
				if sum.Series, err = ql.Series(ctx, w, step); err != nil {
					return nil, queryLogErr(err)
				}
			}
			return &summaryOut{Body: sum}, nil
		})
	register(s, huma.Operation{OperationID: "stats-top", Method: http.MethodGet, Path: "/stats/top", Summary: "Top domains, clients, upstreams, lists or zones of a window", Tags: tags},
		perm, func(ctx context.Context, in *topIn) (*topOut, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			w, e := parseWindow(in.Window)
			if e != nil {
				return nil, e
			}
			b, err := ql.Top(ctx, querylog.TopRequest{Dim: in.Dim, N: in.Top, Blocked: in.Blocked, Window: w})
			if err != nil {
				return nil, queryLogErr(err)
			}
			if b.Items == nil {
				b.Items = []querylog.TopItem{}
			}
			return &topOut{Body: b}, nil
		})
	register(s, huma.Operation{OperationID: "queries-stream", Method: http.MethodGet, Path: "/queries/stream", Summary: "Live query log (Server-Sent Events)", Tags: tags,
		Description: "`text/event-stream`: one event per query (`id:` the row id, `data:` a query-log item as JSON), `: ping` heartbeats every 15 s, `retry: 2000`. " +
			"Resume after a disconnect with `Last-Event-ID` (stored rows after it are replayed, then the stream continues live without gaps or duplicates); " +
			"without it the stream starts live. The query-log filters apply. A client that cannot keep up is disconnected and resumes with `Last-Event-ID`.",
		Responses: map[string]*huma.Response{"200": {Description: "event stream", Content: map[string]*huma.MediaType{
			"text/event-stream": {Schema: &huma.Schema{Type: "string", Description: "Server-Sent Events; each data line is a query-log item"}}}}}},
		perm, func(ctx context.Context, in *streamIn) (*huma.StreamResponse, error) {
			ql, err := s.queryLog()
			if err != nil {
				return nil, err
			}
			for _, v := range []string{in.LastEventID, in.LastEventIDQ} {
				if v = strings.TrimSpace(v); v != "" {
					if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 {
						return nil, errInvalid("Last-Event-ID: want a non-negative event id")
					}
				}
			}
			h := ql.StreamHandler(querylog.StreamOptions{})
			return &huma.StreamResponse{Body: func(hctx huma.Context) {
				r, w := humago.Unwrap(hctx)
				// A stream outlives the server's read and write timeouts: the
				// handler sets a write deadline per event itself, and an
				// expired read deadline would cancel the request.
				rc := http.NewResponseController(w)
				_ = rc.SetReadDeadline(time.Time{})
				_ = rc.SetWriteDeadline(time.Time{})
				h.ServeHTTP(w, r)
			}}, nil
		})
}
