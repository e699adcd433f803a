// Package unblock files, decides and expires unblock requests: the block
// page submits through Submitter, administrators decide through the API, and
// a reconciler moves requests through pending, approved, denied and expired.
package unblock

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"
)

// Submission is what the block page knows when a person asks for an unblock:
// the blocked name, the browser's address and the decision that blocked it.
type Submission struct {
	Domain    string     // blocked name, lower case, no trailing dot
	Client    netip.Addr // the address the block page saw
	ClientID  string     // client ID (DoT SNI, DoH path) when the decision knew one
	Namespace string     // namespace of the deciding policy ("" = the default namespace)
	Policy    string     // namespace/name of the policy that decided
	List      string     // namespace/name of the list, or "service:<id>"
	Rule      string     // the rule text that matched
	Reason    string     // the requester's explanation (plain text)
	Requester string     // optional name or e-mail the requester typed
	At        time.Time  // when the block page saw the request
}

// Result names the request a submission created or merged into.
type Result struct {
	Namespace string
	Name      string
	// Merged is true when a pending request for the same domain and client
	// already existed and this submission was folded into it.
	Merged bool
}

// Submitter files unblock requests. The block page consumes it.
type Submitter interface {
	Submit(ctx context.Context, s Submission) (Result, error)
}

// ErrDisabled: unblockRequests.enabled is false.
var ErrDisabled = errors.New("unblock requests are turned off (unblockRequests.enabled)")

// ErrTooManyPending: unblockRequests.maxPending requests are already pending.
var ErrTooManyPending = errors.New("too many unblock requests are pending; ask an administrator to decide some (unblockRequests.maxPending)")

// RateLimitedError: the client (IPv6 per /64) filed unblockRequests.rateLimit
// requests in the last hour.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("too many unblock requests from this client; try again in %s", e.RetryAfter.Round(time.Minute))
}
