package hilo

import (
	"context"
	"errors"
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

// fetcher is what a rangeCache needs from the servers: the next range of
// its collection, and the returns of ranges it hands back. source is the
// real one; tests give a fake that keeps a node's rules. Safe for
// concurrent use.
type fetcher interface {
	// next returns the next range of collection. prev is what the request
	// reports of the previous range, and prev.held what a reply is judged
	// against: a reply that breaks the contract (CONTRACT.md R11) is never
	// returned.
	next(collection string, prev previous) (*span, error)
	// returnAll sends each group to the node that issued its ranges, a
	// group's items in order and in one call; the outcomes are in the order
	// of the groups' items.
	returnAll(ctx context.Context, groups []returnGroup) [][]returnOutcome
	// describe names the servers, for messages.
	describe() string
}

// cacheSettings are what a client's caches share: its options, its clock,
// its log and its counters.
type cacheSettings struct {
	prefetchAt float64       // share of a range taken before the next is fetched; 0: never
	fetchBound time.Duration // the longest a caller waits for a fetch
	now        func() time.Time
	logf       func(format string, args ...interface{}) // one line at a time
	stats      *counters
	// Called, without mu, when a failed fetch forgot cache c (see
	// launch), before its waiters wake, so that the client drops it from
	// its table. Nil: no table, and a failed fetch forgets nothing (the
	// next call fetches again).
	drop func(c *rangeCache)
}

// flight is one NextRange under way for a collection, on demand or ahead of
// need, or the return of its ranges; callers that find the collection dry
// wait for it.
type flight struct {
	done     chan struct{}
	err      error // set before done closes
	prefetch bool  // a failure is not the waiters' error (a fetch ahead, or a return)
}

// rangeCache is one collection's ranges. The fast path (next) is an atomic
// load of the current span and one atomic add on its counter. When the
// span runs dry, exactly one NextRange is under way at a time (a flight);
// callers arriving meanwhile wait for it, bounded, and take their number
// from what it brought. It owns its refill: it asks its fetcher, and knows
// nothing of the client (a failed call goes back to its caller). Safe for
// concurrent use.
type rangeCache struct {
	name string
	src  fetcher
	set  *cacheSettings
	cur  atomic.Pointer[span] // nil before the first range and after a return

	mu     sync.Mutex
	ahead  *span   // fetched ahead of need, not yet current
	flying *flight // the NextRange or the return under way, if any
	// What the next request reports; prev.held, per node tag, is the
	// highest number of the collection this cache holds or handed out from
	// that node's ranges (after a return, the last number it used of the
	// range handed back; CONTRACT.md R11).
	prev previous
	// Per node tag, the highest number handed out of that node's retired
	// ranges (absent: none); one entry per tag seen.
	used   map[string]int64
	closed bool // the client closed (or forgot it): no number and no fetch from now on
	// A range was accepted, fetched or fetched ahead: the cache is never
	// forgotten (forgetIfUnused).
	received bool
	// Set, with closed, by forgetIfUnused: next returns errForgotten.
	forgotten bool

	// The runway's window, moved only by publish: it began when the span
	// before the current one was published (the current one, for the
	// first), with the numbers taken of that earlier span.
	publishedAt, windowStart time.Time
	windowTakenBefore        int64
}

func newRangeCache(name string, src fetcher, set *cacheSettings, closed bool) *rangeCache {
	return &rangeCache{name: name, src: src, set: set, closed: closed}
}

// errForgotten is what next returns once forgetIfUnused closed the cache.
// It never reaches the application: the client drops the cache from its
// table and looks the collection up again.
var errForgotten = errors.New("hilo: internal: the collection's cache was forgotten")

// forgetIfUnused closes the cache for good if it never received a range
// and no fetch or return is under way (its fetches failed: a name the
// server refuses, say), so that the client can drop it and a caller naming
// many such collections does not grow the client; next then returns
// errForgotten. It holds no numbers, so nothing is handed back, and its
// counters are already the client's. True if it did.
func (c *rangeCache) forgetIfUnused() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.received || c.flying != nil || c.closed {
		return false
	}
	c.closed, c.forgotten = true, true
	return true
}

// isForgotten says whether forgetIfUnused (or a failed first fetch) closed
// the cache for good.
func (c *rangeCache) isForgotten() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.forgotten
}

// caller is who asks a cache for a number (the client, a handle): when next
// fails, its failed says what the call returns; the client's drops a cache
// it forgot and looks the collection up again. Passing it down keeps the
// caller's own fast path a single call.
type caller interface {
	failed(ctx context.Context, rc *rangeCache, err error) (ID, error)
}

// next hands out the next number of the collection. On failure it returns
// by.failed's answer, or, with by nil, the error.
func (c *rangeCache) next(ctx context.Context, by caller) (ID, error) {
	if s := c.cur.Load(); s != nil {
		if k, ok := s.take(); ok {
			if k == s.prefetch {
				c.startPrefetch(s)
			}
			return ID{Number: s.low + k, NodeTag: s.tag}, nil
		}
		return c.refill(ctx, s, by)
	}
	return c.refill(ctx, nil, by)
}

// refill is next's slow path (see fill); on failure it hands over to by.
func (c *rangeCache) refill(ctx context.Context, seen *span, by caller) (ID, error) {
	if c == noCacheYet {
		// A handle's first call: straight to its lookup, without taking
		// the lock that every handle of the process would share.
		return by.failed(ctx, c, errForgotten)
	}
	id, err := c.fill(ctx, seen)
	if err != nil && by != nil {
		return by.failed(ctx, c, err)
	}
	return id, err
}

// fill is next's slow path: seen is the span the caller found dry (nil
// for none). It takes a number from a newer span if one is out, promotes
// the range fetched ahead, or fetches (or waits for the fetch or return
// under way), and loops until it has a number or an error. A caller that
// waited for a fetch that failed returns that fetch's error; it never
// fetches again.
func (c *rangeCache) fill(ctx context.Context, seen *span) (ID, error) {
	waited := false
	defer func() {
		if waited {
			c.set.stats.callsWaited.Add(1)
		}
	}()
	for {
		c.mu.Lock()
		if c.closed {
			forgotten := c.forgotten
			c.mu.Unlock()
			if forgotten {
				return ID{}, errForgotten
			}
			return ID{}, ErrClosed
		}
		if s := c.cur.Load(); s != seen {
			// A newer range is out (or none, after a return): take a number
			// of it (reading its counter would not reserve one).
			seen = s
			c.mu.Unlock()
			if s == nil {
				continue
			}
			if k, ok := s.take(); ok {
				if k == s.prefetch {
					c.startPrefetch(s)
				}
				return ID{Number: s.low + k, NodeTag: s.tag}, nil
			}
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
// take, whichever ends first.
func (c *rangeCache) wait(ctx context.Context, f *flight) error {
	select {
	case <-f.done:
		return nil
	default:
	}
	bound := time.NewTimer(c.set.fetchBound)
	defer bound.Stop()
	select {
	case <-f.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-bound.C:
		return newError(codes.DeadlineExceeded, nil, "waited %s for a range of %s from %s",
			c.set.fetchBound, quoteName(c.name), c.src.describe())
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
	if s == nil || c.closed {
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
	now := c.set.now()
	if old := c.cur.Load(); old != nil {
		// It ran dry: every number of it was handed out.
		c.windowStart, c.windowTakenBefore = c.publishedAt, takenOf(old)
		c.noteUsed(old.tag, old.high)
	} else {
		c.windowStart, c.windowTakenBefore = now, 0
	}
	c.publishedAt = now
	if p := c.set.prefetchAt; p > 0 {
		s.prefetch = int64(math.Ceil(p*float64(s.size))) - 1
		if s.prefetch < 0 {
			s.prefetch = 0
		}
	}
	c.cur.Store(s)
}

// startPrefetch fetches the range after s ahead of need, unless one is
// fetched or being fetched, a return is under way, or the client closed.
func (c *rangeCache) startPrefetch(s *span) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.ahead != nil || c.flying != nil || c.cur.Load() != s {
		return
	}
	c.launch(true)
}

// launch starts a fetch and returns its flight. Called with mu held.
func (c *rangeCache) launch(prefetch bool) *flight {
	f := &flight{done: make(chan struct{}), prefetch: prefetch}
	c.flying = f
	prev := c.prev
	prev.held = c.prev.held.clone()
	go func() {
		s, err := c.src.next(c.name, prev)
		c.mu.Lock()
		forgot := false
		if err != nil {
			c.set.stats.countError(codeOf(err))
			f.err = err
			// A cache that never received a range is forgotten from here
			// too (as forgetIfUnused), when someone keeps a table to drop
			// it from: its callers may all have left (their ctx ended)
			// while this fetch was out, and then none of them would forget
			// it. Its waiters still get err.
			forgot = c.set.drop != nil && !c.received && !c.closed
			if forgot {
				c.closed, c.forgotten = true, true
			}
		} else {
			c.accept(s, prefetch)
		}
		if !forgot {
			c.flying = nil
		}
		c.mu.Unlock()
		if forgot {
			// The flight ends once the client dropped the cache: a caller
			// that gets err finds the client without it, as after
			// forgetIfUnused. (Closed, the cache launches nothing meanwhile.)
			c.set.drop(c)
			c.mu.Lock()
			c.flying = nil
			c.mu.Unlock()
		}
		close(f.done)
	}()
	return f
}

// accept takes s, which the fetcher judged usable: the next request
// reports it, its numbers join its node's held intervals, and it becomes current
// (or waits as the range ahead). Called with mu held.
func (c *rangeCache) accept(s *span, prefetch bool) {
	// The next request reports this range (CONTRACT.md R4), whichever node
	// issued it: after a failover, a node far behind would refuse the high
	// of another node's range on every request (R17).
	c.prev.size, c.prev.rangeAt, c.prev.max = s.size, s.rangeAt, s.high
	c.prev.held.add(s.tag, s.low, s.high)
	c.received = true
	c.set.stats.rangesFetched.Add(1)
	if prefetch {
		c.set.stats.rangesPrefetched.Add(1)
		c.ahead = s
	} else {
		c.publish(s)
	}
}

// unused is what a cache hands back: its groups of returns (see
// takeUnused), and the flight its callers wait on meanwhile (nil when the
// client closes).
type unused struct {
	groups []returnGroup
	flight *flight
}

// takeUnused waits for the fetch under way, if any (it ends within its
// deadlines), then retires the current range and the one fetched ahead and
// says what goes back: the range fetched ahead whole, then the current
// range's unused tail. Items for the same node go in one group (one call,
// in that order); a range of another node goes in a group of its own. No
// number of either range is handed out after this returns. With final (the
// client closes) the cache hands out and fetches nothing from then on;
// otherwise callers wait until endReturn, then fetch a new range. endReturn
// must follow when the result holds groups.
func (c *rangeCache) takeUnused(final bool) unused {
	c.mu.Lock()
	defer c.mu.Unlock()
	if final {
		c.closed = true
	}
	for c.flying != nil {
		f := c.flying
		c.mu.Unlock()
		<-f.done
		c.mu.Lock()
	}
	var ahead, tail *returnItem
	if a := c.ahead; a != nil {
		ahead = &returnItem{collection: c.name, r: a, last: a.low - 1}
		c.ahead = nil
	}
	if s := c.cur.Load(); s != nil {
		taken := s.retire()
		if taken > 0 {
			c.noteUsed(s.tag, s.low+taken-1)
		}
		if taken < s.size {
			tail = &returnItem{collection: c.name, r: s, last: s.low + taken - 1}
		}
		c.cur.Store(nil)
	}
	var u unused
	switch {
	case ahead != nil && tail != nil && ahead.r.target == tail.r.target:
		u.groups = append(u.groups, returnGroup{*ahead, *tail})
	default:
		if ahead != nil {
			u.groups = append(u.groups, returnGroup{*ahead})
		}
		if tail != nil {
			u.groups = append(u.groups, returnGroup{*tail})
		}
	}
	if len(u.groups) > 0 && !final {
		u.flight = &flight{done: make(chan struct{}), prefetch: true}
		c.flying = u.flight
	}
	return u
}

// noteUsed records that numbers up to last of node tag's ranges were handed
// out. Called with mu held.
func (c *rangeCache) noteUsed(tag string, last int64) {
	if c.used == nil {
		c.used = make(map[string]int64)
	}
	if last > c.used[tag] {
		c.used[tag] = last
	}
}

// endReturn ends what takeUnused began: counts each return's outcome
// (outcomes[g][i] is that of u.groups[g][i]), logs the failures, lowers
// the held intervals, and lets waiting callers go on.
func (c *rangeCache) endReturn(u unused, outcomes [][]returnOutcome) {
	var lines []string
	c.mu.Lock()
	for g, group := range u.groups {
		for i, it := range group {
			o := outcomes[g][i]
			switch {
			case o.err != nil:
				c.set.stats.returnsFailed.Add(1)
				c.set.stats.countError(codeOf(o.err))
				lines = append(lines, fmt.Sprintf("hilo: returning numbers %d-%d of collection %s failed: %v",
					it.last+1, it.r.high, quoteName(it.collection), o.err))
			case o.applied || o.max == it.last:
				// A refusal with Max already at last is a retried copy of a
				// return that applied (its reply was lost).
				c.set.stats.returnsApplied.Add(1)
			default:
				c.set.stats.returnsRefused.Add(1)
			}
			// Whatever the answer, this range is never used again, so its
			// numbers above last are no longer held. A return of unknown
			// outcome may have applied, and then the node's next range
			// rightly starts right after last.
			c.prev.held.remove(it.r.tag, it.last+1, it.r.high)
		}
	}
	if len(u.groups) > 0 && !firstRefused(u.groups[0], outcomes[0]) {
		// The first return is of the range fetched last, the one the next
		// request reports (CONTRACT.md R4): unless the node refused it,
		// last_max becomes the highest number handed out of that node's
		// ranges, at or below its Max for ever, so the node skips none of
		// the numbers other clients handed back meanwhile. Refused, the
		// range's high stays (at or below Max: nothing applied).
		c.prev.max = c.used[u.groups[0][0].r.tag]
	}
	f := u.flight
	if f != nil && c.flying == f {
		c.flying = nil
	}
	c.mu.Unlock()
	if f != nil {
		close(f.done)
	}
	for _, line := range lines {
		c.set.logf("%s", line)
	}
}

// firstRefused says whether the node refused the first return of group (a
// failure is not a refusal: its outcome is unknown). A pair's tail applies
// only after the range above it came back, whatever that one's answer said.
func firstRefused(group returnGroup, outcomes []returnOutcome) bool {
	back := func(i int) bool {
		o := outcomes[i]
		return o.err == nil && (o.applied || o.max == group[i].last)
	}
	if outcomes[0].err != nil || back(0) {
		return false
	}
	return !(len(group) == 2 && back(1))
}

// close makes the cache hand out and fetch nothing from now on (calls get
// ErrClosed); takeUnused(true) then hands its ranges back.
func (c *rangeCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
}

// handBack takes the unused ranges of every cache (for good with final),
// sends them all through src at once, and lets each cache record its
// outcomes.
func handBack(ctx context.Context, src fetcher, caches []*rangeCache, final bool) {
	var taken []unused
	var groups []returnGroup
	for _, rc := range caches {
		u := rc.takeUnused(final)
		taken = append(taken, u)
		groups = append(groups, u.groups...)
	}
	var outcomes [][]returnOutcome
	if len(groups) > 0 {
		outcomes = src.returnAll(ctx, groups)
	}
	for i, rc := range caches {
		n := len(taken[i].groups)
		rc.endReturn(taken[i], outcomes[:n])
		outcomes = outcomes[n:]
	}
}
