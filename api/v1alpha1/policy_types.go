package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Policy binds client groups to block and allow lists, blocked services and
// categories, a schedule and resolver settings. When several policies match a
// client, the one with the highest priority wins.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=service-dns,shortName=pol;policy
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="GROUPS",type=string,JSONPath=`.spec.clientGroupRefs`
// +kubebuilder:printcolumn:name="PRIORITY",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="READY",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PolicySpec   `json:"spec,omitempty"`
	Status PolicyStatus `json:"status,omitempty"`
}

// PolicySpec is what a policy applies to its clients.
type PolicySpec struct {
	// ClientGroupRefs name ClientGroups ("namespace/name" or a name in the
	// policy's namespace). Empty applies the policy to every client.
	// +optional
	ClientGroupRefs []string `json:"clientGroupRefs,omitempty"`
	// BlockListRefs name BlockLists ("namespace/name" or a name in the policy's
	// namespace) whose rules block.
	// +optional
	BlockListRefs []string `json:"blockListRefs,omitempty"`
	// AllowListRefs name BlockLists whose rules exempt names from blocking.
	// +optional
	AllowListRefs []string `json:"allowListRefs,omitempty"`
	// GlobalLists false gives this policy's clients none of the global
	// BlockLists (spec.global omitted or true), only the lists named here.
	// Omitted means true: global lists apply in addition to the lists named
	// here.
	// +optional
	GlobalLists *bool `json:"globalLists,omitempty"`
	// ExcludeListRefs name global BlockLists ("namespace/name" or a name in
	// the policy's namespace) this policy's clients do not get. Naming a list
	// that is not global is reported as Degraded, reason NotGlobalList.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	ExcludeListRefs []string `json:"excludeListRefs,omitempty"`
	// AllowOnly answers only names on the allow lists; every other name is blocked.
	// +optional
	AllowOnly bool `json:"allowOnly,omitempty"`
	// BlockMode is how a blocked name is answered; empty means the list's response,
	// else the blocking.defaultResponse setting.
	// +optional
	// +kubebuilder:validation:Enum=nxdomain;zeroIP;refused;customIP;blockPage
	BlockMode string `json:"blockMode,omitempty"`
	// BlockTTL is the TTL of blocked answers.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	BlockTTL string `json:"blockTTL,omitempty"`
	// BlockedServices are catalogue service ids. An unknown id is reported as
	// condition Degraded, reason UnknownService.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	BlockedServices []string `json:"blockedServices,omitempty"`
	// BlockedCategories are catalogue category ids, including services added to
	// the category later. An unknown id is reported as Degraded, UnknownCategory.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	BlockedCategories []string `json:"blockedCategories,omitempty"`
	// AllowedServices are exceptions to blockedCategories. They cancel neither
	// blockedServices nor other policies' blocks.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	AllowedServices []string `json:"allowedServices,omitempty"`
	// Priority orders matching policies; the highest wins.
	// +optional
	Priority int32 `json:"priority,omitempty"`
	// QueryLog false excludes matching clients from the query log. Omitted means true.
	// +optional
	QueryLog *bool `json:"queryLog,omitempty"`
	// Rewrites answer names with fixed records.
	// +optional
	Rewrites []Rewrite `json:"rewrites,omitempty"`
	// SafeSearch answers search engine and video-site host names with the
	// vendor's safe-search target.
	// +optional
	SafeSearch bool `json:"safeSearch,omitempty"`
	// SafeSearchMode is strict or moderate (only the video site has two levels).
	// +optional
	// +kubebuilder:default=strict
	// +kubebuilder:validation:Enum=strict;moderate
	SafeSearchMode string `json:"safeSearchMode,omitempty"`
	// Schedule limits when the policy is active; omitted means always.
	// +optional
	Schedule *Schedule `json:"schedule,omitempty"`
	// UpstreamGroup is a key of the upstreams.groups setting used for matching
	// clients; empty means the default group.
	// +optional
	UpstreamGroup string `json:"upstreamGroup,omitempty"`
}

// Rewrite answers one name with a CNAME or with fixed targets.
type Rewrite struct {
	// Name is the name answered; "*." prefixes match subdomains.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Type is the record type of targets (A, AAAA, TXT, ...).
	// +optional
	// +kubebuilder:validation:Pattern=`^([A-Z0-9]+|TYPE[0-9]+)$`
	Type string `json:"type,omitempty"`
	// CNAME answers the name with this alias.
	// +optional
	CNAME string `json:"cname,omitempty"`
	// Targets are record data in presentation format.
	// +optional
	Targets []string `json:"targets,omitempty"`
}

// Schedule is a daily time window, optionally on some weekdays only. An end
// before the start spans midnight.
type Schedule struct {
	// Start is "HH:MM".
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	Start string `json:"start"`
	// End is "HH:MM".
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	End string `json:"end"`
	// TZ is an IANA time zone name. The rule loads it as the policy compile
	// step does: an unknown zone fails the rule ("unknown time zone ...").
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self != 'Local' && !self.contains(':') && timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0",message="expected an IANA time zone name, e.g. Europe/Berlin or UTC"
	TZ string `json:"tz,omitempty"`
	// Weekdays the window applies on; empty means every day.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Weekdays []Weekday `json:"weekdays,omitempty"`
}

// Weekday is a lower-case three-letter day name.
// +kubebuilder:validation:Enum=mon;tue;wed;thu;fri;sat;sun
type Weekday string

// PolicyStatus is written by the policy reconciler.
type PolicyStatus struct {
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true

// PolicyList is a list of Policy.
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}
