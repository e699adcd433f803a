package upstream

import "sync"

// Answer buffers are sized to the answer, not to the largest DNS message:
// a query waiting for its upstream holds no answer buffer at all (the
// pooled sockets read into one buffer per socket and copy out what
// arrived), and an answer takes the smallest size class that holds it. A
// 64 KiB buffer per waiting query made a flood of cache misses at a silent
// upstream cost gigabytes (issue #20). The classes live in sync.Pools,
// which the garbage collector empties, so memory returns after a burst.
var msgClasses = [...]int{512, 2048, 8192, maxMsgSize + 2}

var msgPools [len(msgClasses)]sync.Pool

// msgBuf holds at most one pooled buffer of a size class.
type msgBuf struct {
	p *[]byte
}

// take returns a buffer of length n (at most maxMsgSize+2), reusing the
// one held when it is large enough; the old contents are not kept.
func (m *msgBuf) take(n int) []byte {
	if m.p != nil && cap(*m.p) >= n {
		return (*m.p)[:n]
	}
	m.release()
	c := len(msgClasses) - 1
	for i, size := range msgClasses {
		if n <= size {
			c = i
			break
		}
	}
	if p, ok := msgPools[c].Get().(*[]byte); ok {
		m.p = p
	} else {
		b := make([]byte, msgClasses[c])
		m.p = &b
	}
	return (*m.p)[:n]
}

// release returns the buffer to its pool.
func (m *msgBuf) release() {
	if m.p == nil {
		return
	}
	for i, size := range msgClasses {
		if cap(*m.p) == size {
			msgPools[i].Put(m.p)
			break
		}
	}
	m.p = nil
}
