package hilo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc/codes"
)

// fakeFetcher stands for hilo nodes behind a fetcher, for rangeCache's
// tests. Written from the contract (README.md's ReturnRange and "A pair of
// adjacent ranges", CONTRACT.md R6 and R11), not from the client: each node
// issues a collection's ranges right above its Max, each with a new token;
// a return applies only to the range the node issued last of that
// collection, with that range's token and low - 1 <= last <= high, and
// then sets Max to last; a whole return of a range whose low is the
// previous range's high + 1 makes that previous range the last issued
// again, any other applied return leaves none. A reply at or below what the
// request says the client holds of that node is refused (INTERNAL), as the
// real fetcher refuses it. It records what each request reported and each
// return. Safe for concurrent use.
type fakeFetcher struct {
	mu       sync.Mutex
	nodes    []*fakeStore
	size     int64
	answerer int           // index of the node that answers the next fetch
	nextErr  []error       // the next fetches fail with these
	retErr   error         // every return fails with it, after the node judged it
	prevs    []previous    // what each fetch reported, held copied
	returned []returnGroup // every group sent back, in order
}

// fakeStore is one node's state: per collection its Max and the ranges it
// issued that a return may still give back, the last one on top.
type fakeStore struct {
	tag    string
	max    map[string]int64
	issued map[string][]*span
	token  uint64
}

func newFakeFetcher(size int64, tags ...string) *fakeFetcher {
	f := &fakeFetcher{size: size}
	for _, tag := range tags {
		f.nodes = append(f.nodes, &fakeStore{tag: tag, max: map[string]int64{}, issued: map[string][]*span{}})
	}
	return f
}

// issue is node n's next range of collection (for this client or, called
// by a test, for another). Called with mu held.
func (f *fakeFetcher) issue(n int, collection string) *span {
	node := f.nodes[n]
	node.token++
	low := node.max[collection] + 1
	s := newSpan(&hilov1.NextRangeResponse{Low: low, High: low + f.size - 1, NodeTag: node.tag,
		RangeToken: node.token}, n)
	node.max[collection] = s.high
	node.issued[collection] = append(node.issued[collection], s)
	return s
}

// anotherClientTakes has node n issue a range of collection to someone else.
func (f *fakeFetcher) anotherClientTakes(n int, collection string) *span {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.issue(n, collection)
}

func (f *fakeFetcher) next(collection string, prev previous) (*span, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	prev.held = prev.held.clone()
	f.prevs = append(f.prevs, prev)
	if len(f.nextErr) > 0 {
		err := f.nextErr[0]
		f.nextErr = f.nextErr[1:]
		return nil, err
	}
	s := f.issue(f.answerer, collection)
	if err := prev.held.check(s.tag, s.low, s.high); err != nil {
		return nil, newError(codes.Internal, err, "%v", err)
	}
	return s, nil
}

// judge applies one return as the node that issued its range would.
// Called with mu held.
func (f *fakeFetcher) judge(it returnItem) returnOutcome {
	node := f.nodes[it.r.target]
	stack := node.issued[it.collection]
	top := len(stack) - 1
	if top < 0 || stack[top].token != it.r.token || it.last < it.r.low-1 || it.last > it.r.high {
		return returnOutcome{max: node.max[it.collection]}
	}
	node.max[it.collection] = it.last
	stack = stack[:top]
	if it.last != it.r.low-1 || top == 0 || stack[top-1].high != it.r.low-1 {
		stack = nil
	}
	node.issued[it.collection] = stack
	return returnOutcome{applied: true, max: it.last}
}

func (f *fakeFetcher) returnAll(ctx context.Context, groups []returnGroup) [][]returnOutcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([][]returnOutcome, len(groups))
	for g, group := range groups {
		f.returned = append(f.returned, group)
		out[g] = make([]returnOutcome, len(group))
		for i, it := range group {
			out[g][i] = f.judge(it)
			if f.retErr != nil {
				out[g][i] = returnOutcome{err: f.retErr}
			}
		}
	}
	return out
}

func (f *fakeFetcher) describe() string { return "the fake nodes" }

// lastPrev is what the latest fetch reported.
func (f *fakeFetcher) lastPrev() previous {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.prevs[len(f.prevs)-1]
}

func newTestCache(f *fakeFetcher, prefetchAt float64, logf func(string, ...interface{})) (*rangeCache, *counters) {
	stats := &counters{}
	set := &cacheSettings{prefetchAt: prefetchAt, fetchBound: 10 * time.Second, now: time.Now, logf: logf,
		stats: stats}
	return newRangeCache("c", f, set, false), stats
}

func mustTake(t *testing.T, rc *rangeCache, n int) []ID {
	t.Helper()
	var ids []ID
	for i := 0; i < n; i++ {
		id, err := rc.next(bg, nil)
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		ids = append(ids, id)
	}
	return ids
}

func wantNumbers(t *testing.T, ids []ID, first int64, tag string) {
	t.Helper()
	for i, id := range ids {
		if id.Number != first+int64(i) || id.NodeTag != tag {
			t.Fatalf("IDs %v, want %d-%d of %s", ids, first, first+int64(len(ids))-1, tag)
		}
	}
}

// The three outcomes of a return with the client kept open (CONTRACT.md
// R11): whatever the answer, the cache never uses the range again, its
// numbers held of the node go down to the last number it used, and the node's
// next range is accepted, from wherever the node's Max is. The echo (R4)
// becomes that last number too, unless the node refused the return: then
// it stays the range's high.
func TestAfterAReturnTheMarkIsTheLastNumberUsedWhateverTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		otherClient, returnFails bool
		wantFirst, wantMax       int64
		applied, refused, failed int64
	}{
		{name: "applied", wantFirst: 6, wantMax: 5, applied: 1},
		{name: "refused: another client took 33-64", otherClient: true, wantFirst: 65, wantMax: 32, refused: 1},
		{name: "failed after it applied", returnFails: true, wantFirst: 6, wantMax: 5, failed: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFetcher(32, "A")
			var logged []string
			rc, stats := newTestCache(f, 0, func(format string, args ...interface{}) {
				logged = append(logged, fmt.Sprintf(format, args...))
			})
			wantNumbers(t, mustTake(t, rc, 5), 1, "A")
			if tc.otherClient {
				f.anotherClientTakes(0, "c")
			}
			if tc.returnFails {
				f.retErr = newError(codes.DeadlineExceeded, nil, "the reply came too late")
			}
			handBack(bg, f, []*rangeCache{rc}, false)
			if len(f.returned) != 1 || len(f.returned[0]) != 1 || f.returned[0][0].last != 5 ||
				f.returned[0][0].r.high != 32 {
				t.Fatalf("returned %v, want 6-32", f.returned)
			}
			wantNumbers(t, mustTake(t, rc, 3), tc.wantFirst, "A")
			if p := f.lastPrev(); !heldIs(p.held, "A", 1, 5) || p.max != tc.wantMax {
				t.Fatalf("the fetch after the return reported max %d and held %v; want max %d, 1-5 for A",
					p.max, p.held, tc.wantMax)
			}
			got := [3]int64{stats.returnsApplied.Load(), stats.returnsRefused.Load(), stats.returnsFailed.Load()}
			if got != [3]int64{tc.applied, tc.refused, tc.failed} || (tc.failed == 1) != (len(logged) == 1) {
				t.Fatalf("returns applied, refused, failed %v and logged %q", got, logged)
			}
		})
	}
}

// Each request reports the range the client got before it (CONTRACT.md
// R4), whichever node issued it: after a failover from A, far ahead, to B,
// the request after B's first range reports B's high, not A's (R17: B
// would refuse A's on every request). The numbers replies are judged by stay
// per node (R11).
func TestAfterAFailoverTheEchoIsTheNewNodesRange(t *testing.T) {
	f := newFakeFetcher(4, "A", "B")
	for i := 0; i < 10; i++ {
		f.anotherClientTakes(0, "c")
	}
	rc, _ := newTestCache(f, 0, t.Logf)
	wantNumbers(t, mustTake(t, rc, 4), 41, "A")
	f.answerer = 1
	wantNumbers(t, mustTake(t, rc, 5), 1, "B")
	p := f.lastPrev()
	if p.size != 4 || p.max != 4 {
		t.Fatalf("the second fetch from B reported size %d, max %d; want B's 1-4: 4, 4", p.size, p.max)
	}
	if !heldIs(p.held, "A", 41, 44) || !heldIs(p.held, "B", 1, 4) {
		t.Fatalf("the second fetch from B judged replies by %v; want A 41-44, B 1-4", p.held)
	}
}

// A range fetched ahead goes back whole before the current range's tail, in
// one group (R7); the numbers held of the node then lose the range ahead,
// then the current range's numbers above the last one used.
func TestAPairGoesBackLaterRangeFirstAndTheMarkFollowsBoth(t *testing.T) {
	f := newFakeFetcher(32, "A")
	rc, stats := newTestCache(f, 0.2, t.Logf)
	wantNumbers(t, mustTake(t, rc, 7), 1, "A") // the 7th asks for 33-64 ahead
	eventually(t, "33-64 is fetched ahead", func() bool { return stats.rangesPrefetched.Load() == 1 })
	handBack(bg, f, []*rangeCache{rc}, false)
	g := f.returned
	if len(g) != 1 || len(g[0]) != 2 || g[0][0].r.low != 33 || g[0][0].last != 32 || g[0][1].r.high != 32 ||
		g[0][1].last != 7 {
		t.Fatalf("returned %v, want one group: 33-64 whole, then 8-32", g)
	}
	if n := stats.returnsApplied.Load(); n != 2 {
		t.Fatalf("%d returns applied, want 2", n)
	}
	wantNumbers(t, mustTake(t, rc, 2), 8, "A")
	if p := f.lastPrev(); !heldIs(p.held, "A", 1, 7) || p.max != 7 {
		t.Fatalf("the fetch after the return reported max %d and held %v; want 7, and 1-7 for A", p.max, p.held)
	}
}

// A range fetched ahead and handed back whole leaves its node's numbers as
// they were before the range came, not at the range's high nor at its low - 1:
// another client's return may since have moved the node's Max below that,
// and the node's next range then starts below the range handed back
// (README.md, "A pair of adjacent ranges").
func TestARangeAheadBackWholeRestoresItsNodesEarlierMark(t *testing.T) {
	f := newFakeFetcher(32, "A", "B")
	rc, stats := newTestCache(f, 0.5, t.Logf)
	f.answerer = 1
	wantNumbers(t, mustTake(t, rc, 10), 1, "B")
	handBack(bg, f, []*rangeCache{rc}, false) // B's 11-32 back: B's Max is 10, 1-10 held
	other := f.anotherClientTakes(1, "c")     // B's 11-42
	f.mu.Lock()
	f.answerer = 0
	f.mu.Unlock()
	wantNumbers(t, mustTake(t, rc, 15), 1, "A")
	f.mu.Lock()
	f.answerer = 1
	f.mu.Unlock()
	mustTake(t, rc, 1) // the 16th of A's 1-32 asks for B's 43-74 ahead
	eventually(t, "B's range is fetched ahead", func() bool { return stats.rangesPrefetched.Load() == 1 })
	handBack(bg, f, []*rangeCache{rc}, false)
	if g := f.returned[1:]; len(g) != 2 || g[0][0].r.low != 43 || g[0][0].last != 42 || g[1][0].r.tag != "A" ||
		g[1][0].last != 16 || stats.returnsApplied.Load() != 3 {
		t.Fatalf("returned %v (%d applied), want B's 43-74 whole and A's 17-32, in groups of their own, all applied",
			g, stats.returnsApplied.Load())
	}
	// The other client hands its 11-42 back whole: B's Max is 10 again.
	if o := f.returnAll(bg, []returnGroup{{{collection: "c", r: other, last: 10}}}); !o[0][0].applied {
		t.Fatalf("the other client's return: %+v", o[0][0])
	}
	wantNumbers(t, mustTake(t, rc, 1), 11, "B")
	if p := f.lastPrev(); !heldIs(p.held, "B", 1, 10) || !heldIs(p.held, "A", 1, 16) {
		t.Fatalf("the fetch after the return reported held %v; want A 1-16 and B 1-10", p.held)
	}
}

// Callers drawing while the ranges go back never get a number of a range
// after its return began: the node issues the numbers given back again, so
// such a number would be handed out twice. The callers go on with new
// ranges, without an error (R8).
func TestReturnsRacingDrawsNeverHandOutANumberTwice(t *testing.T) {
	f := newFakeFetcher(64, "A")
	rc, _ := newTestCache(f, 0.2, t.Logf)
	const callers, rounds = 8, 200
	drawn := make([][]ID, callers)
	var count atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := 0; g < callers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				id, err := rc.next(bg, nil)
				if err != nil {
					t.Errorf("next: %v", err)
					return
				}
				drawn[g] = append(drawn[g], id)
				count.Add(1)
			}
		}(g)
	}
	for r := 0; r < rounds; r++ {
		// Each return comes while the callers draw.
		before := count.Load()
		eventually(t, "the callers draw", func() bool { return count.Load() >= before+50 })
		handBack(bg, f, []*rangeCache{rc}, false)
	}
	close(stop)
	wg.Wait()
	var all []int64
	for _, ids := range drawn {
		for _, id := range ids {
			all = append(all, id.Number)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("%d handed out twice", all[i])
		}
	}
	if len(f.returned) == 0 || len(all) == 0 {
		t.Fatalf("%d returns and %d IDs: the race did not happen", len(f.returned), len(all))
	}
}

// A caller whose fetch fails gets its error, counted once (R10), and the
// next call fetches again.
func TestAFailedFetchIsTheCallersErrorAndTheNextCallFetchesAgain(t *testing.T) {
	f := newFakeFetcher(32, "A")
	unavailable := newError(codes.Unavailable, nil, "no node answered")
	f.nextErr = []error{unavailable}
	rc, stats := newTestCache(f, 0, t.Logf)
	if _, err := rc.next(bg, nil); !errors.Is(err, unavailable) {
		t.Fatalf("next: %v, want the fetch's error", err)
	}
	wantNumbers(t, mustTake(t, rc, 1), 1, "A")
	if n := stats.errors[codes.Unavailable].Load(); n != 1 || len(f.prevs) != 2 {
		t.Fatalf("%d UNAVAILABLE counted, %d fetches; want 1 and 2", n, len(f.prevs))
	}
}

// After the client closes, the cache hands out nothing and fetches nothing.
func TestAClosedCacheRefusesCallsAndFetchesNothing(t *testing.T) {
	f := newFakeFetcher(32, "A")
	rc, _ := newTestCache(f, 0, t.Logf)
	mustTake(t, rc, 3)
	rc.close()
	handBack(bg, f, []*rangeCache{rc}, true)
	if _, err := rc.next(bg, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("next after close: %v, want ErrClosed", err)
	}
	if len(f.prevs) != 1 || len(f.returned) != 1 || f.returned[0][0].last != 3 {
		t.Fatalf("%d fetches and returns %v; want 1 fetch and 4-32 back", len(f.prevs), f.returned)
	}
}
