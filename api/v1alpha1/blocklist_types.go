package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnabledAnnotation switches a whole BlockList off when set to "false".
const EnabledAnnotation = "service.io/enabled"

// BlockList is a list of rules that block (or, in allow mode, exempt) names.
// Rules come from sources: URLs, inline text, ConfigMaps and structured entries.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=service-dns,shortName=blocklist;list;lists;bl
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="MODE",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="ENTRIES",type=integer,JSONPath=`.status.entries`
// +kubebuilder:printcolumn:name="LAST-FETCH",type=date,JSONPath=`.status.lastFetched`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type BlockList struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   BlockListSpec   `json:"spec"`
	Status BlockListStatus `json:"status,omitempty"`
}

// BlockListSpec describes where the rules of a list come from and how a match
// is answered.
// +kubebuilder:validation:XValidation:rule="!has(self.response) || self.response != 'customIP' || has(self.customIP)",message="spec.customIP is required when spec.response is customIP",fieldPath=".customIP"
type BlockListSpec struct {
	// Mode is block (names on the list are blocked) or allow (names on the list
	// are never blocked).
	// +optional
	// +kubebuilder:default=block
	// +kubebuilder:validation:Enum=block;allow
	Mode string `json:"mode,omitempty"`

	// RefreshInterval is how often URL sources are fetched again.
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	RefreshInterval string `json:"refreshInterval,omitempty"`

	// Response is how a blocked name is answered; empty means the
	// blocking.defaultResponse setting. customIP needs spec.customIP.
	// +optional
	// +kubebuilder:validation:Enum=nxdomain;zeroIP;refused;customIP;blockPage
	Response string `json:"response,omitempty"`

	// CustomIP holds the answers of response customIP.
	// +optional
	CustomIP *CustomIP `json:"customIP,omitempty"`

	// Global lists apply to every client, whichever Policy matches it, unless
	// that policy opts out (spec.globalLists false or spec.excludeListRefs);
	// clients no policy matches get them too. false: the list applies only
	// to the policies that name it. Omitted means true.
	// +optional
	Global *bool `json:"global,omitempty"`

	// Sources are where the rules come from.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:XValidation:rule="self.all(s, !has(s.name) || self.exists_one(t, has(t.name) && t.name == s.name))",message="source names must be unique"
	Sources []BlockListSource `json:"sources"`
}

// CustomIP holds the addresses answered for blocked names; a missing family is
// answered with NODATA.
// +kubebuilder:validation:MinProperties=1
type CustomIP struct {
	// +optional
	// +kubebuilder:validation:Format=ipv4
	V4 string `json:"v4,omitempty"`
	// +optional
	// +kubebuilder:validation:Format=ipv6
	V6 string `json:"v6,omitempty"`
}

// BlockListSource is one origin of rules. url, inline and configMapRef exclude
// each other; a source with none of them holds only structured entries.
// +kubebuilder:validation:XValidation:rule="[has(self.url), has(self.inline), has(self.configMapRef)].filter(x, x).size() <= 1",message="at most one of url, inline and configMapRef may be set"
type BlockListSource struct {
	// Name identifies the source in status, the query log and the entries API.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// URL of a list body (http or https; refused at write time otherwise).
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:Pattern=`^[Hh][Tt][Tt][Pp][Ss]?://[^/?#]`
	URL string `json:"url,omitempty"`
	// Inline rules, one per item, in the source's format.
	// +optional
	Inline []string `json:"inline,omitempty"`
	// ConfigMapRef names a ConfigMap of the list's own namespace whose data
	// values are list bodies.
	// +optional
	ConfigMapRef *ConfigMapRef `json:"configMapRef,omitempty"`
	// Format of the rules; auto detects it per line.
	// +optional
	// +kubebuilder:default=auto
	// +kubebuilder:validation:Enum=auto;hosts;domains;adblock;regex
	Format string `json:"format,omitempty"`
	// Subdomains makes hosts and plain-domain entries match subdomains too;
	// adblock and wildcard rules are unaffected.
	// +optional
	Subdomains bool `json:"subdomains,omitempty"`
	// Enabled false keeps the source (and its cached body and digest) but neither
	// fetches nor compiles it. Omitted means true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// Exclude switches off rules of the source; kept across refreshes.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=10000
	Exclude []string `json:"exclude,omitempty"`
	// Entries are structured rules compiled as adblock rules.
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	Entries []BlockListEntry `json:"entries,omitempty"`
}

// ConfigMapRef points at a ConfigMap of the BlockList's own namespace.
type ConfigMapRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Namespace may be empty or the BlockList's own namespace. Another
	// namespace is never read (the service's credentials would read it for
	// the list's author): the list is Ready=False, reason
	// ConfigMapNamespaceNotAllowed.
	// +optional
	Namespace string `json:"namespace,omitempty"`
}

// BlockListEntry is one structured rule.
type BlockListEntry struct {
	// Value is canonical per type: an exact name, "*.domain" for wildcard, a
	// regular expression without slashes for regex.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
	// +optional
	// +kubebuilder:default=exact
	// +kubebuilder:validation:Enum=exact;wildcard;regex
	Type string `json:"type,omitempty"`
	// Enabled omitted means true.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=500
	Comment string `json:"comment,omitempty"`
	// Origin records how the entry was added.
	// +optional
	// +kubebuilder:validation:Enum=manual;querylog;unblock;api;migrated
	Origin string `json:"origin,omitempty"`
	// +optional
	Created *metav1.Time `json:"created,omitempty"`
	// +optional
	Modified *metav1.Time `json:"modified,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=300
	CreatedBy string `json:"createdBy,omitempty"`
	// Request is "namespace/name" of the UnblockRequest that added the entry.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Request string `json:"request,omitempty"`
	// Groups confines the entry to clients of these ClientGroups
	// ("namespace/name" or a name in the list's namespace), whichever policy
	// serves them; empty applies it to every client the list reaches.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=507
	Groups []string `json:"groups,omitempty"`
}

// BlockListStatus is written by the block list reconciler.
type BlockListStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Entries counts the compiled rules of every source.
	// +optional
	Entries int64 `json:"entries,omitempty"`
	// Invalid counts lines that could not be parsed.
	// +optional
	Invalid int64 `json:"invalid,omitempty"`
	// +optional
	LastFetched *metav1.Time `json:"lastFetched,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	RuleCount int64 `json:"ruleCount,omitempty"`
	// Unsupported counts valid rules that are parsed but not applied
	// (modifiers, mid-pattern wildcards, hosts rewrites).
	// +optional
	Unsupported int64 `json:"unsupported,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=name
	Sources []BlockListSourceStatus `json:"sources,omitempty"`
}

// BlockListSourceStatus is the state of one source.
type BlockListSourceStatus struct {
	Name string `json:"name"`
	// Digest is the sha256 of the fetched body.
	// +optional
	Digest string `json:"digest,omitempty"`
	// Enabled is false when the source is switched off, else absent.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// +optional
	Entries int64 `json:"entries,omitempty"`
	// +optional
	Error string `json:"error,omitempty"`
	// +optional
	ETag string `json:"etag,omitempty"`
	// +optional
	Excluded int64 `json:"excluded,omitempty"`
	// +optional
	Invalid int64 `json:"invalid,omitempty"`
	// +optional
	LastFetched *metav1.Time `json:"lastFetched,omitempty"`
	// StaleExcludes are exclude values that match nothing.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	StaleExcludes []string `json:"staleExcludes,omitempty"`
}

// +kubebuilder:object:root=true

// BlockListList is a list of BlockList.
type BlockListList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BlockList `json:"items"`
}
