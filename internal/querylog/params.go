package querylog

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Query-parameter names of the query-log routes (also the CLI flags).
const (
	ParamClient      = "client"
	ParamClientID    = "client_id"
	ParamDomain      = "domain"
	ParamDomainMatch = "domain_match" // exact (default) or substring
	ParamList        = "list"
	ParamQType       = "qtype"
	ParamStatus      = "status"
	ParamStatusClass = "status_class"
	ParamUpstream    = "upstream"
	ParamZone        = "zone"
	ParamPolicy      = "policy"
	ParamSince       = "since" // RFC 3339
	ParamUntil       = "until" // RFC 3339
	ParamLimit       = "limit"
	ParamContinue    = "continue"
)

var knownStatuses = map[string]bool{"answered": true, "cached": true, "stale": true, "blocked": true, "rewritten": true,
	"authoritative": true, "local": true, "control": true, "failed": true, "refused": true, "malformed": true, "dropped": true}

// ParseFilter reads a Filter from query parameters; bad values are
// ErrInvalid. Unknown parameters are ignored (the caller may have its own).
func ParseFilter(q url.Values) (Filter, error) {
	var f Filter
	bad := func(name, why string) (Filter, error) {
		return Filter{}, fmt.Errorf("%w: parameter %s: %s", ErrInvalid, name, why)
	}
	for name, vs := range q {
		if len(vs) > 1 {
			switch name {
			case ParamClient, ParamClientID, ParamDomain, ParamDomainMatch, ParamList, ParamQType, ParamStatus, ParamStatusClass,
				ParamUpstream, ParamZone, ParamPolicy, ParamSince, ParamUntil, ParamLimit, ParamContinue:
				return bad(name, "given more than once")
			}
		}
	}
	str := func(name string, max int) (string, bool) {
		v := strings.TrimSpace(q.Get(name))
		return v, len(v) <= max
	}
	var ok bool
	for _, p := range []struct {
		name string
		dst  *string
		max  int
	}{{ParamClient, &f.Client, 255}, {ParamClientID, &f.ClientID, 255}, {ParamList, &f.List, 512}, {ParamUpstream, &f.Upstream, 512},
		{ParamZone, &f.Zone, 255}, {ParamPolicy, &f.Policy, 512}, {ParamContinue, &f.Continue, 64}} {
		if *p.dst, ok = str(p.name, p.max); !ok {
			return bad(p.name, "too long")
		}
	}
	if f.Domain, ok = str(ParamDomain, 255); !ok {
		return bad(ParamDomain, "too long")
	}
	f.Domain = NormalizeDomain(f.Domain)
	switch m := q.Get(ParamDomainMatch); m {
	case "", MatchExact:
	case MatchSubstring:
		f.DomainMatch = MatchSubstring
	default:
		return bad(ParamDomainMatch, "want exact or substring")
	}
	if f.QType, ok = str(ParamQType, 16); !ok {
		return bad(ParamQType, "too long")
	}
	f.QType = strings.ToUpper(f.QType)
	f.Status = strings.ToLower(strings.TrimSpace(q.Get(ParamStatus)))
	if f.Status != "" && !knownStatuses[f.Status] {
		return bad(ParamStatus, "unknown status")
	}
	f.StatusClass = strings.ToLower(strings.TrimSpace(q.Get(ParamStatusClass)))
	if f.StatusClass != "" {
		if _, ok := statusesOfClass(f.StatusClass); !ok {
			return bad(ParamStatusClass, "want allowed, blocked, rewritten or error")
		}
	}
	for _, p := range []struct {
		name string
		dst  *time.Time
	}{{ParamSince, &f.Since}, {ParamUntil, &f.Until}} {
		if v := q.Get(p.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return bad(p.name, "want an RFC 3339 time")
			}
			*p.dst = t
		}
	}
	if v := q.Get(ParamLimit); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			return bad(ParamLimit, fmt.Sprintf("want 1 to %d", maxLimit))
		}
		f.Limit = n
	}
	if f.Continue != "" {
		if _, err := decodeContinue(f.Continue); err != nil {
			return Filter{}, err
		}
	}
	return f, nil
}
