package cli

import near "github.com/svcdns/svc/internal/suggest"

// suggest returns the candidates close to typed, nearest first; the one
// implementation is internal/suggest, shared with the API's write-time
// validation. It backs every "did you mean" the CLI prints.
func suggest(typed string, candidates []string) []string {
	return near.Nearest(typed, candidates)
}

// didYouMean is "; did you mean X?" or "" when nothing is close.
func didYouMean(typed string, candidates []string) string {
	s := suggest(typed, candidates)
	if len(s) == 0 {
		return ""
	}
	return "; did you mean " + quotedList(s) + "?"
}
