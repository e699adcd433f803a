package policy

import (
	"fmt"
	"time"

	"github.com/svcdns/svc/api/v1alpha1"
)

// window is a compiled schedule: minutes of the day in a time zone, on some
// weekdays. An end before the start spans midnight and belongs to the day
// it started on; start equal to end is the whole day.
type window struct {
	loc        *time.Location
	days       [7]bool // indexed by time.Weekday
	start, end int     // minutes since midnight
}

var weekdays = map[v1alpha1.Weekday]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

func parseWindow(s *v1alpha1.Schedule) (*window, error) {
	tz := s.TZ
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil {
		return nil, fmt.Errorf("time zone %q: %w", tz, err)
	}
	w := &window{loc: loc}
	if w.start, err = minutes(s.Start); err != nil {
		return nil, err
	}
	if w.end, err = minutes(s.End); err != nil {
		return nil, err
	}
	if len(s.Weekdays) == 0 {
		w.days = [7]bool{true, true, true, true, true, true, true}
	}
	for _, d := range s.Weekdays {
		wd, ok := weekdays[d]
		if !ok {
			return nil, fmt.Errorf("weekday %q", d)
		}
		w.days[wd] = true
	}
	return w, nil
}

func minutes(hhmm string) (int, error) {
	var h, m int
	if len(hhmm) != 5 || hhmm[2] != ':' {
		return 0, fmt.Errorf("time %q is not HH:MM", hhmm)
	}
	if _, err := fmt.Sscanf(hhmm, "%02d:%02d", &h, &m); err != nil || h > 23 || m > 59 {
		return 0, fmt.Errorf("time %q is not HH:MM", hhmm)
	}
	return h*60 + m, nil
}

// active reports whether now falls inside the window.
func (w *window) active(now time.Time) bool {
	t := now.In(w.loc)
	m := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	prev := (day + 6) % 7
	switch {
	case w.start == w.end:
		return w.days[day]
	case w.start < w.end:
		return w.days[day] && m >= w.start && m < w.end
	default: // spans midnight
		return (m >= w.start && w.days[day]) || (m < w.end && w.days[prev])
	}
}
