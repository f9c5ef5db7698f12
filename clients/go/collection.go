package hilo

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// span is one range a server issued: immutable bounds, tag and token, and
// one atomic counter of the numbers taken from it. Number low+k belongs to
// the caller whose Add on taken returned k+1; k >= size means the range is
// used up (or retired: see retire), so no number past high is ever handed
// out and none after the range was retired.
type span struct {
	low, high int64
	size      int64 // high - low + 1
	tag       string
	token     uint64
	rangeAt   *timestamppb.Timestamp
	target    int   // index of the target that issued it; returns go there
	prefetch  int64 // taking offset prefetch starts the next fetch; -1: never
	taken     atomic.Int64
}

func newSpan(r *hilov1.NextRangeResponse, target int) *span {
	s := &span{
		low:      r.GetLow(),
		high:     r.GetHigh(),
		size:     r.GetHigh() - r.GetLow() + 1,
		tag:      r.GetNodeTag(),
		token:    r.GetRangeToken(),
		rangeAt:  r.GetRangeAt(),
		target:   target,
		prefetch: -1,
	}
	return s
}

// take hands out the next number of s, if any is left, as its offset k
// (the number is low + k). After retire the counter sits at the top of
// int64 and the next adds wrap it below 0: those find nothing too.
func (s *span) take() (k int64, ok bool) {
	k = s.taken.Add(1) - 1
	if k >= s.size || k < 0 {
		return 0, false
	}
	return k, true
}

// retire ends s: no number of it is handed out after this returns. It says
// how many were handed out before.
func (s *span) retire() int64 {
	n := s.taken.Swap(math.MaxInt64)
	if n > s.size || n < 0 {
		return s.size
	}
	return n
}

// flight is one NextRange under way for a collection, on demand or ahead of
// need; callers that find the collection dry wait for it.
type flight struct {
	done     chan struct{}
	err      error // set before done closes
	prefetch bool
}

// rangeCache is one collection's ranges. The fast path (next) is an atomic
// load of the current span and one atomic add on its counter. When the
// span runs dry, exactly one NextRange is under way at a time (a flight);
// callers arriving meanwhile wait for it, bounded, and take their number
// from what it brought. Safe for concurrent use.
type rangeCache struct {
	name   string
	client *Client
	cur    atomic.Pointer[span] // nil before the first range

	mu      sync.Mutex
	ahead   *span   // fetched ahead of need, not yet current
	flying  *flight // the NextRange under way, if any
	prev    previous
	lastOf  map[string]int64 // per node tag, the high of its last range
	closing bool             // Close has begun: no more fetches

	// The runway's window, moved only by publish: it began when the span
	// before the current one was published (the current one, for the
	// first), with the numbers taken of that earlier span.
	publishedAt, windowStart time.Time
	windowTakenBefore        int64
}

// next hands out the next number of the collection.
func (c *rangeCache) next(ctx context.Context) (ID, error) {
	if s := c.cur.Load(); s != nil {
		if k, ok := s.take(); ok {
			if k == s.prefetch {
				c.startPrefetch(s)
			}
			return ID{Number: s.low + k, NodeTag: s.tag}, nil
		}
		return c.refill(ctx, s)
	}
	return c.refill(ctx, nil)
}

// refill is next's slow path: seen is the span the caller found dry (nil
// for none). It takes a number from a newer span if one is out, promotes
// the range fetched ahead, or fetches (or waits for the fetch under way),
// and loops until it has a number or an error. A caller that waited for a
// fetch that failed returns that fetch's error; it never fetches again.
func (c *rangeCache) refill(ctx context.Context, seen *span) (ID, error) {
	waited := false
	defer func() {
		if waited {
			c.client.stats.callsWaited.Add(1)
		}
	}()
	for {
		c.mu.Lock()
		if c.closing || c.client.closed.Load() {
			c.mu.Unlock()
			return ID{}, ErrClosed
		}
		if s := c.cur.Load(); s != seen {
			// A newer range is out: take a number of it (reading its
			// counter would not reserve one).
			seen = s
			if k, ok := s.take(); ok {
				c.mu.Unlock()
				if k == s.prefetch {
					c.startPrefetch(s)
				}
				return ID{Number: s.low + k, NodeTag: s.tag}, nil
			}
			c.mu.Unlock()
			continue
		}
		if c.ahead != nil {
			// The range fetched ahead takes over without a round trip.
			c.publish(c.ahead)
			c.ahead = nil
			c.mu.Unlock()
			continue
		}
		f := c.flying
		if f == nil {
			f = c.launch(false)
		}
		c.mu.Unlock()
		waited = true
		if err := c.wait(ctx, f); err != nil {
			return ID{}, err
		}
		if f.err != nil && !f.prefetch {
			return ID{}, f.err
		}
		// A failed prefetch is not this caller's error: the next pass
		// fetches on demand (once; its failure is returned).
	}
}

// wait waits for f, for the caller's ctx, or for the longest a fetch can
// take (every target's deadline), whichever ends first.
func (c *rangeCache) wait(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
		return nil
	default:
	}
	bound := time.NewTimer(c.client.fetchBound)
	defer bound.Stop()
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-bound.C:
		return newError(codes.DeadlineExceeded, nil, "waited %s for a range of %q from %s",
			c.client.fetchBound, c.name, c.client.src.describe())
	}
}

// takenOf is how many numbers of s were handed out so far.
func takenOf(s *span) int64 {
	if n := s.taken.Load(); n >= 0 && n < s.size {
		return n
	}
	return s.size // used up, or retired
}

// runway is how long the numbers the cache holds last at the rate it
// handed them out since its window began; false when it holds no range,
// handed out no number in the window, or no time passed in it.
func (c *rangeCache) runway(now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.cur.Load()
	if s == nil || c.closing {
		return 0, false
	}
	taken := takenOf(s)
	held := s.size - taken
	if c.ahead != nil {
		held += c.ahead.size
	}
	handedOut := c.windowTakenBefore + taken
	window := now.Sub(c.windowStart)
	if handedOut <= 0 || window <= 0 {
		return 0, false
	}
	return time.Duration(float64(window) * float64(held) / float64(handedOut)), true
}

// publish makes s the current span. Called with mu held.
func (c *rangeCache) publish(s *span) {
	now := c.client.now()
	if old := c.cur.Load(); old != nil {
		c.windowStart, c.windowTakenBefore = c.publishedAt, takenOf(old)
	} else {
		c.windowStart, c.windowTakenBefore = now, 0
	}
	c.publishedAt = now
	if p := c.client.prefetchAt; p > 0 {
		s.prefetch = int64(math.Ceil(p*float64(s.size))) - 1
		if s.prefetch < 0 {
			s.prefetch = 0
		}
	}
	c.cur.Store(s)
}

// startPrefetch fetches the range after s ahead of need, unless one is
// fetched or being fetched, or the client is closing.
func (c *rangeCache) startPrefetch(s *span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing || c.client.closed.Load() || c.ahead != nil || c.flying != nil || c.cur.Load() != s {
		return
	}
	c.launch(true)
}

// launch starts a fetch and returns its flight. Called with mu held.
func (c *rangeCache) launch(prefetch bool) *flight {
	f := &flight{done: make(chan struct{}), prefetch: prefetch}
	c.flying = f
	prev := c.prev
	c.client.inflight.Add(1)
	go func() {
		defer c.client.inflight.Done()
		s, err := c.client.src.next(c.name, prev, c.check)
		c.mu.Lock()
		if err != nil {
			c.client.stats.countError(codeOf(err))
			f.err = err
		} else {
			// The size rule's inputs; last_max is the highest number seen
			// from any range of the collection.
			c.prev.size, c.prev.rangeAt = s.size, s.rangeAt
			if s.high > c.prev.max {
				c.prev.max = s.high
			}
			if c.lastOf == nil {
				c.lastOf = make(map[string]int64)
			}
			c.lastOf[s.tag] = s.high
			c.client.stats.rangesFetched.Add(1)
			if prefetch {
				c.client.stats.rangesPrefetched.Add(1)
				c.ahead = s
			} else {
				c.publish(s)
			}
		}
		c.flying = nil
		c.mu.Unlock()
		close(f.done)
	}()
	return f
}

// The most numbers a client takes in one range (CONTRACT.md R11): a server's
// ranges are at most its --max_range_size (2^20 by default); a bigger one is
// a tampered reply or a broken server, whose high echoed as last_max every
// node would then refuse.
const maxRangeSize = 1 << 32

// check refuses a NextRange reply that breaks the contract: a node tag
// that is not 1-4 characters of A-Z and 0-9, low < 1, high < low, more than
// maxRangeSize numbers, a range_at that is not a valid Timestamp (unset
// counts as 1970, which is valid), or a range that does not lie above the
// last one this client got for the collection from the same node.
func (c *rangeCache) check(r *hilov1.NextRangeResponse) error {
	if !validTag(r.GetNodeTag()) {
		return fmt.Errorf("NextRange replied with node tag %q, which is not 1-4 characters of A-Z and 0-9",
			r.GetNodeTag())
	}
	if r.GetLow() < 1 || r.GetHigh() < r.GetLow() {
		return fmt.Errorf("NextRange replied with the invalid range [%d, %d]", r.GetLow(), r.GetHigh())
	}
	// high - low cannot overflow: low >= 1.
	if r.GetHigh()-r.GetLow() >= maxRangeSize {
		return fmt.Errorf("NextRange replied with the range [%d, %d] of %d numbers; a client takes at most %d in one range",
			r.GetLow(), r.GetHigh(), uint64(r.GetHigh()-r.GetLow())+1, int64(maxRangeSize))
	}
	if at := r.GetRangeAt(); at != nil && at.CheckValid() != nil {
		return fmt.Errorf("NextRange replied with range_at %d s %d ns, which is not a valid Timestamp (0001-01-01 to 9999-12-31)",
			at.GetSeconds(), at.GetNanos())
	}
	c.mu.Lock()
	last, ok := c.lastOf[r.GetNodeTag()]
	c.mu.Unlock()
	if ok && r.GetLow() <= last {
		return fmt.Errorf("NextRange replied with range [%d, %d] of node %s, which does not lie above "+
			"that node's previous range of %q (up to %d)", r.GetLow(), r.GetHigh(), r.GetNodeTag(), c.name, last)
	}
	return nil
}

func validTag(tag string) bool {
	if len(tag) < 1 || len(tag) > 4 {
		return false
	}
	for i := 0; i < len(tag); i++ {
		if b := tag[i]; !(b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}

// stopFetching makes the cache fetch no more and waits for the fetch under
// way, if any (it ends within its deadlines).
func (c *rangeCache) stopFetching() {
	c.mu.Lock()
	c.closing = true
	f := c.flying
	c.mu.Unlock()
	if f != nil {
		<-f.done
	}
}

// takeUnused retires the current range and the one fetched ahead and says
// what goes back: the range fetched ahead whole, then the current range's
// unused tail. Items for the same node go in one group (one call, in that
// order); a range of another node goes in a group of its own. Called after
// stopFetching.
func (c *rangeCache) takeUnused() []returnGroup {
	c.mu.Lock()
	defer c.mu.Unlock()
	var groups []returnGroup
	var ahead, tail *returnItem
	if a := c.ahead; a != nil {
		ahead = &returnItem{collection: c.name, r: a, last: a.low - 1}
		c.ahead = nil
	}
	if s := c.cur.Load(); s != nil {
		if taken := s.retire(); taken < s.size {
			tail = &returnItem{collection: c.name, r: s, last: s.low + taken - 1}
		}
	}
	switch {
	case ahead != nil && tail != nil && ahead.r.target == tail.r.target:
		groups = append(groups, returnGroup{*ahead, *tail})
	default:
		if ahead != nil {
			groups = append(groups, returnGroup{*ahead})
		}
		if tail != nil {
			groups = append(groups, returnGroup{*tail})
		}
	}
	return groups
}
