package hilo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	hilov1 "github.com/hilo-id/hilo/gen/go/hilo/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

var bg = context.Background()

// newTestClient is a client of the given in-process nodes (in that
// order), closed when the test ends.
func newTestClient(t *testing.T, cfg Config, nodes ...*fakeNode) *Client {
	t.Helper()
	var clients []hilov1.HiLoClient
	for _, n := range nodes {
		clients = append(clients, serve(t, n))
	}
	c, err := NewFromClients(cfg, clients...)
	if err != nil {
		t.Fatalf("NewFromClients: %v", err)
	}
	// Retries pause without sleeping in these tests.
	c.src.sleep = func(ctx context.Context, d time.Duration) error { return ctx.Err() }
	t.Cleanup(func() {
		if err := c.Close(bg); err != nil && !errors.Is(err, ErrClosed) {
			t.Errorf("Close at the end of the test: %v", err)
		}
	})
	return c
}

// eventually waits (bounded) until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustID(t *testing.T, c *Client, collection string) ID {
	t.Helper()
	id, err := c.NextID(bg, collection)
	if err != nil {
		t.Fatalf("NextID(%q): %v", collection, err)
	}
	return id
}

func wantCode(t *testing.T, err error, code codes.Code, msgPart string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *hilo.Error", err, err)
	}
	if e.Code != code || status.Code(err) != code {
		t.Fatalf("error %v: code %s (status.Code %s), want %s", err, e.Code, status.Code(err), code)
	}
	if !strings.Contains(err.Error(), msgPart) {
		t.Fatalf("error %q does not mention %q", err, msgPart)
	}
}

func TestDocumentIDsCarryCollectionSeparatorNumberAndTag(t *testing.T) {
	c := newTestClient(t, Config{Separator: ':'}, newFakeNode(t, "AB1"))
	for want := 1; want <= 3; want++ {
		id, err := c.NextDocumentID(bg, "orders")
		if err != nil {
			t.Fatal(err)
		}
		if w := fmt.Sprintf("orders:%d-AB1", want); id != w {
			t.Fatalf("got %q, want %q", id, w)
		}
	}
	h := c.Collection("orders")
	buf, err := h.AppendDocumentID(bg, []byte("x="))
	if err != nil || string(buf) != "x=orders:4-AB1" {
		t.Fatalf("AppendDocumentID: %q, %v", buf, err)
	}
	if id, err := h.NextID(bg); err != nil || id != (ID{5, "AB1"}) {
		t.Fatalf("handle NextID: %v, %v", id, err)
	}
}

// A target that resolves to several addresses (a DNS name, a headless
// Service) is one node at a time: with round robin inside it, ranges came
// from alternate nodes and Close sent each return down whichever
// connection came next, where the other node refused it.
func TestTargetWithSeveralAddressesUsesOneAtATime(t *testing.T) {
	a, b := newFakeNode(t, "A"), newFakeNode(t, "B")
	lisA, lisB := listen(t, a), listen(t, b)
	r := manual.NewBuilderWithScheme("hilotest")
	r.InitialState(resolver.State{Addresses: []resolver.Address{{Addr: "node-a"}, {Addr: "node-b"}}})
	c, err := New(Config{
		Targets:    []string{"hilotest:///both"},
		PrefetchAt: PrefetchOff,
		DialOptions: []grpc.DialOption{
			grpc.WithResolvers(r),
			grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
				if addr == "node-a" {
					return lisA.Dial()
				}
				return lisB.Dial()
			}),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tags := map[string]int{}
	for i := 0; i < 6; i++ {
		c.Collection(fmt.Sprintf("c%d", i)) // a new collection: a NextRange each
		tags[mustID(t, c, fmt.Sprintf("c%d", i)).NodeTag]++
	}
	if len(tags) != 1 {
		t.Fatalf("six ranges of one target came from nodes %v; want one node", tags)
	}
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got := c.Stats().ReturnsApplied; got != 6 {
		t.Fatalf("returns applied %d, want 6 (each to the node that issued it)", got)
	}
}

// A name that is not UTF-8 cannot be marshalled: INVALID_ARGUMENT, as the
// server would answer, and nothing is sent (CONTRACT.md R13, R19).
func TestInvalidUTF8CollectionIsInvalidArgument(t *testing.T) {
	node := newFakeNode(t, "A")
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, node)
	_, err := c.NextID(bg, "u\xffx")
	wantCode(t, err, codes.InvalidArgument, "is not valid UTF-8")
	_, err = c.NextID(bg, "u\xed\xa0\x80x") // a surrogate, encoded
	wantCode(t, err, codes.InvalidArgument, "is not valid UTF-8")
	if id := mustID(t, c, "u\U0001F600x"); id.Number != 1 {
		t.Fatalf("a valid name got %v", id)
	}
}

func TestConfigRefusesBadSeparatorsAndOptions(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string
	}{
		{Config{Separator: '|'}, "separator '|' is reserved"},
		// The number is read back as the digits between the last
		// separator and the last '-': with '-' as separator both are the
		// same character.
		{Config{Separator: '-'}, "separator '-' is the character that ends the number; the number of an ID " +
			"is the digits between the last separator and the last '-'"},
		{Config{PrefetchAt: 1}, "PrefetchAt is 1"},
		{Config{PrefetchAt: -0.5}, "PrefetchAt is -0.5"},
		{Config{RPCTimeout: -time.Second}, "RPCTimeout is -1s"},
		{Config{Separator: 0x01}, "separator U+0001 is a control character"},
		{Config{Separator: 0x7f}, "separator U+007F is a control character"},
		{Config{Separator: 0x85}, "separator U+0085 is a control character"},
	}
	for d := '0'; d <= '9'; d++ {
		cases = append(cases, struct {
			cfg  Config
			want string
		}{Config{Separator: d}, fmt.Sprintf("separator '%c' is a digit", d)})
	}
	for _, tc := range cases {
		tc.cfg.Targets = []string{"127.0.0.1:1"}
		_, err := New(tc.cfg)
		wantCode(t, err, codes.InvalidArgument, tc.want)
	}
	_, err := New(Config{})
	wantCode(t, err, codes.InvalidArgument, "Config.Targets is empty")
}

func TestCallerContextEndsItsWait(t *testing.T) {
	node := newFakeNode(t, "A")
	gate := make(chan struct{})
	arrived := make(chan struct{}, 1)
	node.with(func() { node.gate, node.arrived = gate, arrived })
	c := newTestClient(t, Config{}, node)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error)
	go func() {
		_, err := c.NextID(ctx, "slow")
		done <- err
	}()
	<-arrived
	cancel()
	if err := <-done; err != ctx.Err() || !errors.Is(err, context.Canceled) {
		t.Fatalf("NextID after cancel: %v, want ctx.Err() = %v", err, ctx.Err())
	}
	close(gate)
	// The fetch goes on for others: the next caller gets 1.
	if id := mustID(t, c, "slow"); id.Number != 1 {
		t.Fatalf("after the cancelled wait got %+v, want number 1", id)
	}
}

func TestServerErrorsWrapTheirStatus(t *testing.T) {
	c := newTestClient(t, Config{}, newFakeNode(t, "A"))
	_, err := c.NextID(bg, "")
	wantCode(t, err, codes.InvalidArgument, "target 0: NextRange of \"\"")
	st, ok := status.FromError(errors.Unwrap(err))
	if !ok || st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "collection name") {
		t.Fatalf("unwrapped %v: not the server's status", errors.Unwrap(err))
	}
}

// The runway (Stats.Runway): what the client holds of a collection, at the
// rate it handed numbers out since the range before the current one came.
func TestRunwayIsTheNumbersHeldAtTheRecentRate(t *testing.T) {
	node := newFakeNode(t, "A")
	c := newTestClient(t, Config{}, node)
	var mu sync.Mutex
	now := time.Unix(1_800_000_000, 0)
	c.settings.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	runway := func() (float64, bool) {
		d, ok := c.Stats().Runway["r"]
		return d.Seconds(), ok
	}
	near := func(what string, want float64) {
		t.Helper()
		if got, ok := runway(); !ok || got < want-1e-6 || got > want+1e-6 {
			t.Fatalf("%s: runway %v (%v), want %v s", what, got, ok, want)
		}
	}
	if _, ok := runway(); ok {
		t.Fatal("a runway before any range")
	}
	mustID(t, c, "r")
	if _, ok := runway(); ok {
		t.Fatal("a runway with no time passed")
	}
	advance(time.Second)
	near("31 held at 1 a second", 31)
	for i := 2; i <= 10; i++ { // the 7th asks for the next range
		mustID(t, c, "r")
	}
	eventually(t, "the next range is fetched ahead", func() bool { return c.Stats().RangesPrefetched == 1 })
	rc := (*c.caches.Load())["r"]
	rc.mu.Lock()
	ahead := rc.ahead.size
	rc.mu.Unlock()
	near("22 and the range ahead at 10 a second", float64(22+ahead)/10)
	advance(time.Second)
	for i := 11; i <= 33; i++ {
		mustID(t, c, "r")
	}
	// The range ahead took over; the window began with 1-32: 33 in 2 s.
	near("the range ahead in use", float64(ahead-1)*2/33)
	advance(2 * time.Second)
	near("no number for 2 s", float64(ahead-1)*4/33)
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, ok := runway(); ok {
		t.Fatal("a runway after Close")
	}
}

// holdTwoRanges leaves c holding 1-32 with 7 numbers used and 33-96
// fetched ahead, both from node.
func holdTwoRanges(t *testing.T, c *Client) {
	t.Helper()
	for i := 0; i < 7; i++ {
		mustID(t, c, "pair")
	}
	eventually(t, "33-96 is fetched ahead", func() bool { return c.Stats().RangesPrefetched == 1 })
}

func TestCloseFallsBackToSingleReturnsInTheSameOrder(t *testing.T) {
	node := newFakeNode(t, "A")
	node.with(func() { node.noBatches = true })
	c := newTestClient(t, Config{}, node)
	holdTwoRanges(t, c)
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	node.with(func() {
		got := node.singles
		if len(got) != 2 || got[0].End != 96 || got[0].Last != 32 || got[1].End != 32 || got[1].Last != 7 {
			t.Fatalf("ReturnRange calls %v, want 33-96 whole then 8-32", got)
		}
		if m := node.max("pair"); m != 7 {
			t.Fatalf("the node's Max is %d, want 7", m)
		}
	})
}

func TestCloseRetriesAReturnThatFoundTheNodeUnavailable(t *testing.T) {
	node := newFakeNode(t, "A")
	node.with(func() { node.returnsErr = []codes.Code{codes.Unavailable, codes.DeadlineExceeded} })
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, node)
	for i := 0; i < 3; i++ {
		mustID(t, c, "retry")
	}
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	node.with(func() {
		if len(node.batches) != 3 || node.max("retry") != 3 {
			t.Fatalf("%d ReturnRanges calls, Max %d; want 3 calls and Max 3", len(node.batches), node.max("retry"))
		}
		for _, b := range node.batches {
			if !proto.Equal(b, node.batches[0]) {
				t.Fatalf("a retry differs: %v vs %v", b, node.batches[0])
			}
		}
	})
	if s := c.Stats(); s.ReturnsApplied != 1 {
		t.Fatalf("stats %+v, want 1 return applied", s)
	}
}

func TestCloseLogsAndCountsAReturnThatKeptFailingButReturnsNil(t *testing.T) {
	node := newFakeNode(t, "A")
	node.with(func() {
		node.returnsErr = []codes.Code{codes.Unavailable, codes.Unavailable, codes.Unavailable, codes.Unavailable}
	})
	var logged []string
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff, Logf: func(f string, a ...interface{}) {
		logged = append(logged, fmt.Sprintf(f, a...))
	}}, node)
	mustID(t, c, "lost")
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v; a failed return is logged and counted, never an error (R13)", err)
	}
	node.with(func() {
		if len(node.batches) != returnAttempts {
			t.Fatalf("%d calls, want %d attempts", len(node.batches), returnAttempts)
		}
	})
	if s := c.Stats(); s.ReturnsFailed != 1 || s.Errors[codes.Unavailable] != 1 {
		t.Fatalf("stats %+v, want 1 failed return counted as UNAVAILABLE", s)
	}
	if len(logged) != 1 || !strings.Contains(logged[0], `returning numbers 2-32 of collection "lost" failed`) {
		t.Fatalf("logged %q", logged)
	}
}

func TestCloseNeverSplitsAPairAcrossBatches(t *testing.T) {
	// 601 collections at once: above the server's default creations a minute.
	node := newFakeNode(t, "A", "--max_collection_creations_per_minute=1000")
	c := newTestClient(t, Config{}, node)
	// c000 holds only a tail; c001-c600 a tail and a range fetched ahead:
	// 1201 returns, more than one call's 1000. In name order the 1000th
	// return is c500's range fetched ahead, whose tail must go with it.
	mustID(t, c, "c000")
	const pairs = 600
	for i := 1; i <= pairs; i++ {
		for k := 0; k < 7; k++ {
			mustID(t, c, fmt.Sprintf("c%03d", i))
		}
	}
	eventually(t, "every range after the first is fetched ahead", func() bool {
		return c.Stats().RangesPrefetched == pairs
	})
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	node.with(func() {
		callOf := map[string][]int{}
		total := 0
		for b, batch := range node.batches {
			if len(batch.Returns) > 1000 {
				t.Fatalf("a ReturnRanges call of %d returns; the limit is 1000", len(batch.Returns))
			}
			total += len(batch.Returns)
			for _, r := range batch.Returns {
				callOf[r.Collection] = append(callOf[r.Collection], b)
			}
		}
		if total != 1+2*pairs {
			t.Fatalf("%d returns, want %d", total, 1+2*pairs)
		}
		for name, calls := range callOf {
			if len(calls) == 2 && calls[0] != calls[1] {
				t.Fatalf("the two returns of %s went in calls %v", name, calls)
			}
			if m := node.max(name); m != 7 && name != "c000" {
				t.Fatalf("%s: Max %d after Close, want 7", name, m)
			}
		}
	})
	if s := c.Stats(); s.ReturnsApplied != 1+2*pairs {
		t.Fatalf("stats %+v, want every return applied", s)
	}
}

func TestCloseFallbackKeepsEachCollectionsOrderAcrossManyCollections(t *testing.T) {
	node := newFakeNode(t, "A")
	node.with(func() { node.noBatches = true })
	c := newTestClient(t, Config{}, node)
	const collections = 40
	for i := 0; i < collections; i++ {
		for k := 0; k < 7; k++ {
			mustID(t, c, fmt.Sprintf("m%02d", i))
		}
	}
	eventually(t, "every collection has a range fetched ahead", func() bool {
		return c.Stats().RangesPrefetched == collections
	})
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	node.with(func() {
		if len(node.singles) != 2*collections {
			t.Fatalf("%d ReturnRange calls, want %d", len(node.singles), 2*collections)
		}
		aheadAt := map[string]int{}
		for i, r := range node.singles {
			if r.Last == 32 {
				aheadAt[r.Collection] = i
				continue
			}
			if at, ok := aheadAt[r.Collection]; !ok || at > i {
				t.Fatalf("%s: its tail went back before its range fetched ahead", r.Collection)
			}
		}
		for i := 0; i < collections; i++ {
			name := fmt.Sprintf("m%02d", i)
			if m := node.max(name); m != 7 {
				t.Fatalf("%s: Max %d after Close, want 7", name, m)
			}
		}
	})
}

// stuckClient is a HiLoClient whose NextRange ignores its deadline and
// answers only when released: a fetch that hangs.
type stuckClient struct {
	hilov1.HiLoClient
	release chan struct{}
}

func (s *stuckClient) NextRange(ctx context.Context, in *hilov1.NextRangeRequest, _ ...grpc.CallOption) (*hilov1.NextRangeResponse, error) {
	<-s.release
	return nil, status.Error(codes.Unavailable, "released")
}

func TestWaitersGiveUpOnAFetchThatHangs(t *testing.T) {
	stuck := &stuckClient{release: make(chan struct{})}
	c, err := NewFromClients(Config{RPCTimeout: 10 * time.Millisecond}, stuck)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	defer close(stuck.release)
	done := make(chan error, 1)
	go func() {
		_, err := c.NextID(bg, "hang")
		done <- err
	}()
	select {
	case err := <-done:
		// The bound is every target's deadline and one more: 2 x 10 ms.
		wantCode(t, err, codes.DeadlineExceeded, `waited 20ms for a range of "hang" from target 0`)
	case <-time.After(10 * time.Second):
		t.Fatal("NextID still waits for a hung fetch after 10 s")
	}
}

func TestTheTargetThatAnsweredStaysPreferred(t *testing.T) {
	a, b := newFakeNode(t, "A"), newFakeNode(t, "B")
	a.with(func() { a.nextErr = []codes.Code{codes.DeadlineExceeded} })
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, a, b)
	if id := mustID(t, c, "stay"); id != (ID{1, "B"}) {
		t.Fatalf("got %+v, want 1-B after A timed out", id)
	}
	// A is fine again, but B answered last: the next ranges come from B.
	for i := 2; i <= 40; i++ {
		if id := mustID(t, c, "stay"); id.NodeTag != "B" {
			t.Fatalf("ID %d came from %s, want B", i, id.NodeTag)
		}
	}
	a.with(func() {
		if len(a.nextReqs) != 1 {
			t.Fatalf("A was asked %d times, want once", len(a.nextReqs))
		}
	})
	if s := c.Stats(); s.Failovers != 1 || s.RangesFetched != 2 {
		t.Fatalf("stats %+v, want 1 failover and 2 ranges", s)
	}
}

// A connection that takes longer to set up than gRPC's reconnect backoff (a
// TLS handshake under load, a link with a long round trip) still serves the
// first call: each connection attempt may take as long as a call
// (RPCTimeout), not just the backoff's first step of about 100 ms.
func TestASlowConnectionSetUpStillServesTheFirstCall(t *testing.T) {
	lis := listen(t, newFakeNode(t, "S"))
	const setUp = 400 * time.Millisecond // the link's delay before the connection is there
	slowLink := grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		delay := time.NewTimer(setUp)
		defer delay.Stop()
		select {
		case <-delay.C:
			return lis.Dial()
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	c, err := New(Config{Targets: []string{"slow-link"}, DialOptions: []grpc.DialOption{slowLink}})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer c.Close(bg)
	id, err := c.NextID(bg, "slow")
	if err != nil || id != (ID{Number: 1, NodeTag: "S"}) {
		t.Fatalf("NextID over a link that takes %s to connect: %v, %v; want 1-S", setUp, id, err)
	}
}

// ReturnUnusedRanges hands every collection's ranges back in one call per
// node and keeps the client: each collection continues right after the
// last number it handed out. After Close it is ErrClosed.
func TestReturnUnusedRangesKeepsTheClientAndFailsAfterClose(t *testing.T) {
	node := newFakeNode(t, "A")
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, node)
	for i := 0; i < 3; i++ {
		mustID(t, c, "k1")
	}
	mustID(t, c, "k2")
	if err := c.ReturnUnusedRanges(bg); err != nil {
		t.Fatalf("ReturnUnusedRanges: %v", err)
	}
	node.with(func() {
		if len(node.batches) != 1 || len(node.batches[0].Returns) != 2 || node.max("k1") != 3 || node.max("k2") != 1 {
			t.Fatalf("ReturnRanges calls %v; want one with both tails, Max 3 and 1", node.batches)
		}
	})
	if id := mustID(t, c, "k1"); id.Number != 4 {
		t.Fatalf("k1 went on with %d, want 4", id.Number)
	}
	if id := mustID(t, c, "k2"); id.Number != 2 {
		t.Fatalf("k2 went on with %d, want 2", id.Number)
	}
	if s := c.Stats(); s.ReturnsApplied != 2 || s.RangesFetched != 4 {
		t.Fatalf("stats %+v, want 2 returns applied and 4 ranges fetched", s)
	}
	if err := c.Close(bg); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if m := node.max("k1"); m != 4 {
		t.Fatalf("after Close k1's Max is %d, want 4", m)
	}
	if err := c.ReturnUnusedRanges(bg); !errors.Is(err, ErrClosed) {
		t.Fatalf("ReturnUnusedRanges after Close: %v, want ErrClosed", err)
	}
}

// A collection whose fetch is under way is not forgotten, even if it never
// received a range; once that fetch failed, it is.
func TestACollectionWithAFetchUnderWayIsNotForgotten(t *testing.T) {
	node := newFakeNode(t, "A")
	gate := make(chan struct{})
	arrived := make(chan struct{}, 1)
	node.with(func() { node.gate, node.arrived, node.nextErr = gate, arrived, []codes.Code{codes.ResourceExhausted} })
	c := newTestClient(t, Config{}, node)
	done := make(chan error, 1)
	go func() {
		_, err := c.NextID(bg, "held")
		done <- err
	}()
	<-arrived
	if (*c.caches.Load())["held"].forgetIfUnused() {
		t.Fatal("a cache with a fetch under way was forgotten")
	}
	wantCollections(t, c, "held")
	node.with(func() { node.gate, node.arrived = nil, nil })
	close(gate)
	wantCode(t, <-done, codes.ResourceExhausted, "fails on purpose")
	wantCollections(t, c)
	if id := mustID(t, c, "held"); id.Number != 1 {
		t.Fatalf("after the failed fetch got %+v, want number 1", id)
	}
	wantErrors(t, c, map[codes.Code]int64{codes.ResourceExhausted: 1})
}

// A collection that received a range is kept when a later fetch fails, and
// goes on right after the numbers it handed out.
func TestACollectionThatReceivedARangeIsKeptAfterAFailure(t *testing.T) {
	node := newFakeNode(t, "A")
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, node)
	for i := 1; i <= 32; i++ { // the first range, 1-32
		mustID(t, c, "kept")
	}
	rc := (*c.caches.Load())["kept"]
	node.with(func() { node.nextErr = []codes.Code{codes.ResourceExhausted} })
	_, err := c.NextID(bg, "kept")
	wantCode(t, err, codes.ResourceExhausted, "fails on purpose")
	if (*c.caches.Load())["kept"] != rc {
		t.Fatal("a collection that received a range was dropped after a failure")
	}
	if id := mustID(t, c, "kept"); id.Number != 33 {
		t.Fatalf("after the failure got %+v, want number 33", id)
	}
}

// A handle whose own call fails on a collection that never received a
// range keeps nothing of it: the client drops the collection and the
// handle goes back to where a new handle starts. Its next call looks the
// collection up again.
func TestAHandleKeepsNothingOfACollectionItsFailedCallForgot(t *testing.T) {
	node := newFakeNode(t, "A")
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, node)
	h := c.Collection("refused")
	node.with(func() { node.nextErr = []codes.Code{codes.ResourceExhausted, codes.ResourceExhausted} })
	for call := 1; call <= 2; call++ {
		_, err := h.NextID(bg)
		wantCode(t, err, codes.ResourceExhausted, "fails on purpose")
		if h.rangeCache() != noCacheYet {
			t.Fatalf("after failed call %d the handle keeps the forgotten cache", call)
		}
		wantCollections(t, c)
	}
	if id, err := h.NextID(bg); err != nil || id != (ID{1, "A"}) {
		t.Fatalf("the handle once the node accepts: %+v, %v; want 1 of A", id, err)
	}
	if h.rangeCache() != (*c.caches.Load())["refused"] {
		t.Fatal("the handle does not keep the collection's new cache")
	}
	wantErrors(t, c, map[codes.Code]int64{codes.ResourceExhausted: 2})
}

// A handle made before another caller's failed call forgot its collection
// still works; so does a handle that held the collection's cache when it
// was forgotten (the handle's own call had left, its ctx ended, while the
// fetch was out). Each looks the collection up again, gets 1, and keeps the
// new cache. Every call counts once.
func TestAHandleOutlivesItsCollectionBeingForgotten(t *testing.T) {
	node := newFakeNode(t, "A")
	c := newTestClient(t, Config{PrefetchAt: PrefetchOff}, node)
	early := c.Collection("early")
	node.with(func() { node.nextErr = []codes.Code{codes.ResourceExhausted} })
	_, err := c.NextID(bg, "early")
	wantCode(t, err, codes.ResourceExhausted, "fails on purpose")
	wantCollections(t, c)
	if id, err := early.NextID(bg); err != nil || id != (ID{1, "A"}) {
		t.Fatalf("the handle made before the failure: %+v, %v; want 1 of A", id, err)
	}

	gate := make(chan struct{})
	arrived := make(chan struct{}, 1)
	node.with(func() { node.gate, node.arrived, node.nextErr = gate, arrived, []codes.Code{codes.ResourceExhausted} })
	done := make(chan error, 1)
	go func() {
		_, err := c.NextID(bg, "held")
		done <- err
	}()
	<-arrived // the fetch of "held" is out, and held there
	held := c.Collection("held")
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	if _, err := held.NextID(cancelled); err != context.Canceled {
		t.Fatalf("the handle's call with its ctx ended: %v, want context.Canceled", err)
	}
	stale := held.rangeCache()
	if stale != (*c.caches.Load())["held"] {
		t.Fatal("the handle does not hold the collection's cache after its first call")
	}
	node.with(func() { node.gate, node.arrived = nil, nil })
	close(gate)
	wantCode(t, <-done, codes.ResourceExhausted, "fails on purpose")
	wantCollections(t, c, "early")
	if id, err := held.NextID(bg); err != nil || id != (ID{1, "A"}) {
		t.Fatalf("the handle whose cache was forgotten: %+v, %v; want 1 of A", id, err)
	}
	if now := held.rangeCache(); now == stale || now != (*c.caches.Load())["held"] {
		t.Fatal("the handle does not keep the collection's new cache")
	}
	wantCollections(t, c, "early", "held")
	wantErrors(t, c, map[codes.Code]int64{codes.ResourceExhausted: 2})
	if s := c.Stats(); s.CallsWaited != 5 || s.RangesFetched != 2 {
		t.Fatalf("stats %+v, want 5 calls waited and 2 ranges fetched", s)
	}
}
