package auth

import "time"

// Clock tells the time; tests inject a fake one.
type Clock func() time.Time

func sleepBriefly() { time.Sleep(20 * time.Millisecond) }
