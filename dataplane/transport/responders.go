package transport

import "time"

// job is one query to answer off the connection's reader.
type job interface{ run() }

// responders run answers on reusable goroutines: a job goes to an idle
// responder if one waits, else to a new one, so a query never waits behind
// another (one blocked on an upstream holds only its responder). Responders
// wait for more work after an answer, so their stacks, grown once by the
// pipeline, serve many answers instead of growing again on every query;
// they exit after responderIdle without work, or when the server stops.
type responders struct {
	work chan job // unbuffered: hand-off only to a waiting responder
	stop <-chan struct{}
}

const responderIdle = 5 * time.Second

func newResponders(stop <-chan struct{}) *responders {
	return &responders{work: make(chan job), stop: stop}
}

func (r *responders) do(j job) {
	select {
	case r.work <- j:
	default:
		go r.loop(j)
	}
}

func (r *responders) loop(j job) {
	j.run()
	t := time.NewTimer(responderIdle)
	defer t.Stop()
	for {
		select {
		case j := <-r.work:
			j.run()
			t.Reset(responderIdle)
		case <-t.C:
			return
		case <-r.stop:
			return
		}
	}
}
