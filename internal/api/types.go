package api

import "time"

// ListBody is the envelope of every list: {items, continue, took_ms}.
type ListBody[T any] struct {
	Items    []T     `json:"items"`
	Continue string  `json:"continue"`
	TookMS   float64 `json:"took_ms"`
}

func (l *ListBody[T]) setTook(ms float64) { l.TookMS = ms }

// AuthListBody is the envelope of the auth lists (users, tokens, ...).
type AuthListBody[T any] struct {
	Items     []T      `json:"items"`
	Continue  string   `json:"continue"`
	TookMS    int64    `json:"took_ms"`
	Diagnoses []string `json:"diagnoses"`
}

func (l *AuthListBody[T]) setTook(ms float64) { l.TookMS = int64(ms) }

// ApplyResult reports one applied object.
type ApplyResult struct {
	Kind            string `json:"kind"`
	Name            string `json:"name"`
	Result          string `json:"result" enum:"created,updated,unchanged,deleted,error"`
	Namespace       string `json:"namespace,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
	Error           string `json:"error,omitempty"`
	ErrorKey        string `json:"errorKey,omitempty"`
	Hint            string `json:"hint,omitempty"`
	// Warnings say why an accepted object is not (fully) in effect, e.g. a
	// policy naming a list that does not exist yet.
	Warnings []string `json:"warnings,omitempty"`
	// Notes say whom the object reaches once written: for a BlockList to
	// whom it applies ("blocklist/ads applies to everyone except policies
	// kids"), for a Policy which lists its clients get. Informational.
	Notes []string `json:"notes,omitempty"`
}

// DNSQueryRequest asks the data plane to resolve a name as a client would.
type DNSQueryRequest struct {
	Name   string `json:"name" minLength:"1" maxLength:"255"`
	Client string `json:"client,omitempty" maxLength:"255"`
	DNSSEC bool   `json:"dnssec,omitempty"`
	Proto  string `json:"proto,omitempty" enum:"udp,tcp,dot,doh,doq,doh3"`
	Type   string `json:"type,omitempty" maxLength:"16"`
}

// DNSFlags are the header flags of an answer.
type DNSFlags struct {
	AA bool `json:"aa"`
	TC bool `json:"tc"`
	RD bool `json:"rd"`
	RA bool `json:"ra"`
	AD bool `json:"ad"`
	CD bool `json:"cd"`
}

// DNSQueryResult is the answer to a DNSQueryRequest.
type DNSQueryResult struct {
	Name        string   `json:"name"`
	Type        string   `json:"type"`
	Client      string   `json:"client"`
	Rcode       string   `json:"rcode"`
	Status      string   `json:"status"`
	StatusClass string   `json:"status_class"`
	Answer      []string `json:"answer"`
	Authority   []string `json:"authority"`
	Additional  []string `json:"additional"`
	Flags       DNSFlags `json:"flags"`
	LatencyMS   float64  `json:"latency_ms"`
	Node        string   `json:"node"`
	TookMS      float64  `json:"took_ms"`
	Error       string   `json:"error,omitempty"`
	List        string   `json:"list,omitempty"`
	Rule        string   `json:"rule,omitempty"`
	Upstream    string   `json:"upstream,omitempty"`
	Policy      string   `json:"policy,omitempty" doc:"the policy that decided the answer (namespace/name), empty when none matched"`
	EDE         *DNSEDE  `json:"ede,omitempty" doc:"the Extended DNS Error (RFC 8914) of the answer, if it carries one"`
}

// DNSEDE is an Extended DNS Error option of an answer.
type DNSEDE struct {
	Code int    `json:"code" doc:"INFO-CODE, e.g. 15 (Blocked), 17 (Filtered)"`
	Name string `json:"name" doc:"the code's name in RFC 8914, e.g. Blocked"`
	Text string `json:"text,omitempty" doc:"EXTRA-TEXT, e.g. the list and rule that blocked the name"`
}

func (r *DNSQueryResult) setTook(ms float64) { r.TookMS = ms }

// BlockingRequest disables blocking for a while or enables it again.
type BlockingRequest struct {
	Blocking bool       `json:"blocking" doc:"false disables blocking on this node"`
	Duration string     `json:"duration,omitempty" doc:"how long blocking stays disabled, e.g. 10m" maxLength:"32"`
	Until    *time.Time `json:"until,omitempty" doc:"when blocking comes back"`
}

// BlockingState reports the blocking toggle of a node.
type BlockingState struct {
	Blocking   bool       `json:"blocking"`
	Configured bool       `json:"configured"`
	Scope      string     `json:"scope" enum:"node,cluster"`
	Node       string     `json:"node"`
	TookMS     float64    `json:"took_ms"`
	Timer      float64    `json:"timer,omitempty"`
	Until      *time.Time `json:"until,omitempty"`
}

func (b *BlockingState) setTook(ms float64) { b.TookMS = ms }

// DiagnosisMessage is one diagnosis shown by /info/messages.
type DiagnosisMessage struct {
	Severity string `json:"severity" enum:"error,warning,info"`
	Source   string `json:"source"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
	Node     string `json:"node"`
	Hint     string `json:"hint,omitempty"`
	Object   string `json:"object,omitempty"`
}
