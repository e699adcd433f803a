package v1alpha1

import (
	"regexp"
	"testing"
	"time"
)

// The schema's pattern of start and end (the Schedule markers).
var clockPattern = regexp.MustCompile(`^([01][0-9]|2[0-3]):[0-5][0-9]$`)

func TestParseSchedule(t *testing.T) {
	for _, c := range []struct {
		s     Schedule
		field string // "" valid
	}{
		{Schedule{Start: "21:00", End: "07:00", TZ: "Europe/Berlin", Weekdays: []Weekday{"mon"}}, ""},
		{Schedule{Start: "21:00", End: "07:00"}, ""},
		{Schedule{Start: "21:00", End: "07:00", TZ: "Europe/Berln"}, "tz"},
		{Schedule{Start: "21:00", End: "07:00", TZ: "Local"}, "tz"},
		{Schedule{Start: "9pm", End: "07:00"}, "start"},
		{Schedule{Start: "21:00", End: "24:00"}, "end"},
		{Schedule{Start: "21:00", End: "07:00", Weekdays: []Weekday{"mon", "monday"}}, "weekdays[1]"},
	} {
		_, err := ParseSchedule(&c.s)
		se, _ := err.(*ScheduleError)
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%+v: %v", c.s, err)
		case c.field != "" && (se == nil || se.Field != c.field):
			t.Errorf("%+v: %v, want an error of field %s", c.s, err, c.field)
		}
	}
}

// FuzzParseSchedule: no input panics, a clock parses exactly when the
// schema's pattern admits it, and a parsed window answers Active.
func FuzzParseSchedule(f *testing.F) {
	f.Add("21:00", "07:00", "Europe/Berlin", "mon")
	f.Add("9pm", "+1:00", "Local", "")
	f.Add("23:59", "00:00", "../../etc/passwd", "sun")
	f.Fuzz(func(t *testing.T, start, end, tz, day string) {
		if _, err := clockMinutes(start); (err == nil) != clockPattern.MatchString(start) {
			t.Fatalf("clock %q: parse error %v, pattern match %v", start, err, clockPattern.MatchString(start))
		}
		w, err := ParseSchedule(&Schedule{Start: start, End: end, TZ: tz, Weekdays: []Weekday{Weekday(day)}})
		if err != nil {
			if _, ok := err.(*ScheduleError); !ok {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		_ = w.Active(time.Unix(0, 0))
	})
}
