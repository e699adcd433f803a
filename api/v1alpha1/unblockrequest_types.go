package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// UnblockRequest asks an administrator to unblock a domain. It is filed from
// the block page (or the API) as pending; an administrator approves it, which
// adds an allow entry for everyone or for client groups, exactly or with
// subdomains, permanently or for a time, or denies it. Pending requests expire.
//
// The kind has no status subresource: the decision is written with the object.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=service-dns,path=unblockrequests,singular=unblockrequest
// +kubebuilder:printcolumn:name="DOMAIN",type=string,JSONPath=`.spec.domain`
// +kubebuilder:printcolumn:name="PHASE",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="AGE",type=date,JSONPath=`.metadata.creationTimestamp`
type UnblockRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec UnblockRequestSpec `json:"spec"`
	// +optional
	// +kubebuilder:default={}
	Status UnblockRequestStatus `json:"status,omitempty"`
}

// UnblockRequestSpec is what is asked for, and (set on approval) how it is
// granted.
// +kubebuilder:validation:XValidation:rule="self.scope != 'groups' || (has(self.groups) && size(self.groups) > 0)",message="scope groups needs at least one group",fieldPath=".groups"
// +kubebuilder:validation:XValidation:rule="self.scope == 'groups' || !has(self.groups) || size(self.groups) == 0",message="groups are only allowed with scope groups",fieldPath=".groups"
// +kubebuilder:validation:XValidation:rule="!(has(self.permanent) && self.permanent && has(self.duration))",message="duration and permanent exclude each other",fieldPath=".duration"
type UnblockRequestSpec struct {
	// Domain is the blocked name to unblock, without a trailing dot. Immutable.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)(\.[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.domain is immutable"
	Domain string `json:"domain"`
	// Reason is the requester's explanation.
	// +optional
	// +kubebuilder:validation:MaxLength=1000
	Reason string `json:"reason,omitempty"`
	// Requester is who filed the request.
	// +optional
	Requester *Requester `json:"requester,omitempty"`
	// List is the namespace/name of the list (or "service:<id>") that blocked the
	// domain, as shown on the block page.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	List string `json:"list,omitempty"`
	// Policy is the namespace/name of the policy that decided the block.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Policy string `json:"policy,omitempty"`
	// Rule is the rule text that matched, as shown on the block page.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Rule string `json:"rule,omitempty"`
	// Scope of the unblock on approval: everyone, or the client groups in groups.
	// +optional
	// +kubebuilder:default=everyone
	// +kubebuilder:validation:Enum=everyone;groups
	Scope string `json:"scope,omitempty"`
	// Groups are ClientGroups ("namespace/name" or a name in the request's
	// namespace); required with scope groups, refused otherwise.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=100
	Groups []string `json:"groups,omitempty"`
	// Match is exact (the domain only) or subdomains (the domain and every name
	// under it).
	// +optional
	// +kubebuilder:default=exact
	// +kubebuilder:validation:Enum=exact;subdomains
	Match string `json:"match,omitempty"`
	// Duration limits the unblock to this long after approval ("24h").
	// Omitted (or permanent true) means permanent.
	// +optional
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Duration string `json:"duration,omitempty"`
	// Permanent makes the unblock permanent; it excludes duration.
	// +optional
	Permanent *bool `json:"permanent,omitempty"`
}

// Requester is who filed an unblock request.
type Requester struct {
	// IP is the client address the block page saw.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	IP string `json:"ip,omitempty"`
	// ClientName is the client's name when the service knows it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClientName string `json:"clientName,omitempty"`
	// User is the authenticated user who filed the request through the API.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	User string `json:"user,omitempty"`
	// ClientID is the client ID (DoT SNI, DoH path) the blocked query
	// carried, when there was one.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ClientID string `json:"clientID,omitempty"`
	// Contact is the name or e-mail address the requester typed (optional).
	// +optional
	// +kubebuilder:validation:MaxLength=254
	Contact string `json:"contact,omitempty"`
}

// UnblockRequestStatus is the decision.
type UnblockRequestStatus struct {
	// Phase is pending until an administrator decides; approved, denied, or
	// expired (a pending request past unblockRequests.pendingExpiry, or an
	// approval whose duration ran out).
	// +optional
	// +kubebuilder:default=pending
	// +kubebuilder:validation:Enum=pending;approved;denied;expired
	Phase string `json:"phase,omitempty"`
	// DecidedBy is the principal that approved or denied.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	DecidedBy string `json:"decidedBy,omitempty"`
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`
	// Comment is the administrator's note to the requester.
	// +optional
	// +kubebuilder:validation:MaxLength=1000
	Comment string `json:"comment,omitempty"`
	// ExpiresAt is when a pending request expires or a timed approval ends.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
	// Entry is "namespace/name" of the allow list that holds the approval's entry.
	// +optional
	// +kubebuilder:validation:MaxLength=300
	Entry string `json:"entry,omitempty"`
	// Policies are the namespace/name of the policies an approval for
	// client groups attached the allow list to.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Policies []string `json:"policies,omitempty"`
	// Submissions counts how often the request was filed while pending (a
	// repeat for the same domain and client is merged into it).
	// +optional
	Submissions int32 `json:"submissions,omitempty"`
	// LastSubmittedAt is when it was filed last.
	// +optional
	LastSubmittedAt *metav1.Time `json:"lastSubmittedAt,omitempty"`
	// Conditions: Ready (True once decided and carried out; reason
	// Pending, Approved, Denied, Expired or a problem).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +kubebuilder:object:root=true

// UnblockRequestList is a list of UnblockRequest.
type UnblockRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UnblockRequest `json:"items"`
}
