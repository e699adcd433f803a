package dataplane

import (
	"context"
	"fmt"
)

// Explanation is why the pipeline would answer a name the way it does, as
// far as the stages before the cache decide it.
type Explanation struct {
	// Decided is true when a stage before the cache answered (blocked,
	// rewritten, authoritative, control, refused); false means the name
	// would go on to the cache and upstream.
	Decided bool
	Status  Status
	Reason  Reason
	List    string
	Rule    string
	Policy  string
	// Groups are the client groups the client was identified in.
	Groups []string
}

// Blocked reports whether a block list (or blocked service) decided.
func (e Explanation) Blocked() bool { return e.Decided && e.Status == StatusBlocked }

// Explain runs req through the same stages a DNS query passes up to, but
// not including, the cache: ingress, identify, control, local,
// authoritative and blocking. Nothing is sent upstream, logged or counted,
// so the block page can ask "why was this client blocked from this name"
// for every page view without polluting the query log or statistics.
func (s *Server) Explain(ctx context.Context, req QueryRequest) (Explanation, error) {
	if err := ctx.Err(); err != nil {
		return Explanation{}, err
	}
	q, err := s.syntheticQuery(req)
	if err != nil {
		return Explanation{}, err
	}
	defer putQuery(q)
	decided, err := s.explainStages(q)
	if err != nil {
		return Explanation{}, fmt.Errorf("query %q: %w", req.Name, err)
	}
	e := Explanation{Decided: decided, Status: q.Status, Reason: q.Reason, List: q.List, Rule: q.RuleText(), Policy: q.Policy}
	e.Groups = append(e.Groups, q.ClientInfo.Groups...)
	return e, nil
}

// explainStages runs the stages before "cache"; a panic is an error here,
// not a SERVFAIL, since nobody is waiting for an answer.
func (s *Server) explainStages(q *Query) (decided bool, err error) {
	i := 0
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("stage %s panicked: %v", s.stages[i].name, v)
		}
	}()
	for ; i < len(s.stages) && s.stages[i].name != "cache"; i++ {
		switch s.stages[i].run(s, q) {
		case stageNext:
			continue
		case stageDetach:
			return false, fmt.Errorf("stage %s wanted to continue elsewhere", s.stages[i].name)
		default:
			return true, nil
		}
	}
	return false, nil
}
