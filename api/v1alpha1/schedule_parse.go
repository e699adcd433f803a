package v1alpha1

import (
	"fmt"
	"strconv"
	"time"
)

// ScheduleError names the field of a Schedule that does not parse, with what
// is expected. Write-time validation and the policy compile step both use
// ParseSchedule, so the API refuses exactly what the data plane cannot use.
// +kubebuilder:object:generate=false
type ScheduleError struct {
	Field    string // "start", "end", "tz" or "weekdays[i]"
	Value    string
	Expected string
}

func (e *ScheduleError) Error() string {
	return fmt.Sprintf("schedule.%s %q: %s", e.Field, e.Value, e.Expected)
}

// ScheduleWindow is a parsed Schedule: minutes of the day in a time zone, on
// some weekdays (indexed by time.Weekday).
// +kubebuilder:object:generate=false
type ScheduleWindow struct {
	Location   *time.Location
	Days       [7]bool
	Start, End int // minutes since midnight
}

var weekdayNames = map[Weekday]time.Weekday{"sun": time.Sunday, "mon": time.Monday, "tue": time.Tuesday,
	"wed": time.Wednesday, "thu": time.Thursday, "fri": time.Friday, "sat": time.Saturday}

// ParseSchedule checks and parses a schedule; the error is a *ScheduleError.
// An empty tz means UTC; no weekdays means every day.
func ParseSchedule(s *Schedule) (*ScheduleWindow, error) {
	w := &ScheduleWindow{}
	var err error
	if w.Start, err = clockMinutes(s.Start); err != nil {
		return nil, &ScheduleError{Field: "start", Value: s.Start, Expected: "expected HH:MM on a 24-hour clock, e.g. 21:30"}
	}
	if w.End, err = clockMinutes(s.End); err != nil {
		return nil, &ScheduleError{Field: "end", Value: s.End, Expected: "expected HH:MM on a 24-hour clock, e.g. 07:00"}
	}
	tz := s.TZ
	if tz == "" {
		tz = "UTC"
	}
	// "Local" would mean whatever zone the node happens to run in.
	if tz == "Local" {
		return nil, &ScheduleError{Field: "tz", Value: s.TZ, Expected: "expected an IANA time zone name, e.g. Europe/Berlin or UTC"}
	}
	if w.Location, err = time.LoadLocation(tz); err != nil {
		return nil, &ScheduleError{Field: "tz", Value: s.TZ, Expected: "unknown time zone; expected an IANA time zone name, e.g. Europe/Berlin, America/New_York or UTC"}
	}
	if len(s.Weekdays) == 0 {
		w.Days = [7]bool{true, true, true, true, true, true, true}
	}
	for i, d := range s.Weekdays {
		wd, ok := weekdayNames[d]
		if !ok {
			return nil, &ScheduleError{Field: fmt.Sprintf("weekdays[%d]", i), Value: string(d), Expected: "expected one of mon, tue, wed, thu, fri, sat, sun"}
		}
		w.Days[wd] = true
	}
	return w, nil
}

// Active reports whether now falls inside the window. An end before the start
// spans midnight and belongs to the day it started on; start equal to end is
// the whole day.
func (w *ScheduleWindow) Active(now time.Time) bool {
	t := now.In(w.Location)
	m := t.Hour()*60 + t.Minute()
	day := t.Weekday()
	prev := (day + 6) % 7
	switch {
	case w.Start == w.End:
		return w.Days[day]
	case w.Start < w.End:
		return w.Days[day] && m >= w.Start && m < w.End
	default: // spans midnight
		return (m >= w.Start && w.Days[day]) || (m < w.End && w.Days[prev])
	}
}

func clockMinutes(hhmm string) (int, error) {
	if len(hhmm) != 5 || hhmm[2] != ':' {
		return 0, fmt.Errorf("not HH:MM")
	}
	h, err1 := strconv.Atoi(hhmm[:2])
	m, err2 := strconv.Atoi(hhmm[3:])
	if err1 != nil || err2 != nil || h < 0 || h > 23 || m < 0 || m > 59 || hhmm[0] == '+' || hhmm[3] == '+' || hhmm[0] == '-' || hhmm[3] == '-' {
		return 0, fmt.Errorf("not HH:MM")
	}
	return h*60 + m, nil
}
