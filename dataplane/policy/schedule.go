package policy

import (
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
)

// window is a compiled schedule (v1alpha1.ParseSchedule, the parse the API
// refuses bad schedules with). never marks a schedule that did not parse: such
// a policy is never active, because "always" would block around the clock
// what the owner meant to block for an hour.
type window struct {
	w     *v1alpha1.ScheduleWindow
	never bool
}

func parseWindow(s *v1alpha1.Schedule) (*window, error) {
	w, err := v1alpha1.ParseSchedule(s)
	if err != nil {
		return nil, err
	}
	return &window{w: w}, nil
}

// active reports whether now falls inside the window.
func (w *window) active(now time.Time) bool {
	if w.never {
		return false
	}
	return w.w.Active(now)
}
