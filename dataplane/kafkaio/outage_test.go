package kafkaio

import (
	"errors"
	"sync"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// requestCut fails every request of one kind a kfake cluster receives while
// it is set (as a broker restarting would: the connection closes before the
// request is handled), and counts them, so a test can tell it simulated an
// outage at all.
type requestCut struct {
	mu   sync.Mutex
	down bool
	cut  int
}

func cutRequests(kc *kfake.Cluster, key kmsg.Key) *requestCut {
	c := &requestCut{}
	kc.ControlKey(int16(key), func(kmsg.Request) (kmsg.Response, error, bool) {
		kc.KeepControl()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.down {
			c.cut++
			return nil, errors.New("broker restarting"), true
		}
		return nil, nil, false
	})
	return c
}

func (c *requestCut) set(down bool) {
	c.mu.Lock()
	c.down = down
	c.mu.Unlock()
}

// count is how many requests were cut off so far.
func (c *requestCut) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cut
}
